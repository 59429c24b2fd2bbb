"""The in-memory records of one partition of the embedded log."""

from __future__ import annotations

from laneway.sources.embedded.segment import PartitionFile
from laneway.types import Message

_COMPACT_AT = 4096


class PartitionLog:
    """Records of one partition as a list of :class:`laneway.Message`, indexed by offset.

    ``records[i]`` has offset ``base + i`` (offsets are contiguous in memory). ``start`` is
    the first retained offset: records below it were trimmed (committed by every group) or
    dropped (``when_full="drop_oldest"``) and are no longer returned. They are released from
    the list in chunks — once at least half the list or 4096 records are below ``start`` — so
    trimming costs amortized O(1) per record while ``read`` stays a plain list slice.

    ``generations`` are the log's epochs: ``(first offset, generation)``, the generation
    growing by one each time the partition's file lost its tail (cut on open): the records
    written from then on are of the new generation (see
    :mod:`laneway.sources.embedded.segment`). In memory, generation 0 throughout.
    """

    __slots__ = ("base", "file", "generations", "partition", "records", "start", "topic")

    def __init__(
        self,
        topic: str,
        partition: int,
        records: list[Message] | None = None,
        start: int = 0,
        file: PartitionFile | None = None,
        generations: list[tuple[int, int]] | None = None,
    ) -> None:
        self.topic = topic
        self.partition = partition
        self.records: list[Message] = records if records is not None else []
        self.base = self.records[0].offset if self.records else 0
        self.start = self.base
        self.file = file
        self.generations: list[tuple[int, int]] = generations or [(0, 0)]
        self.advance_start(start)

    def begin_generation(self) -> None:
        """Records from the end on are of a new generation (the log lost records that were
        there: see :meth:`GroupCoordinator.refloor_locked
        <laneway.sources.embedded.coordinator.GroupCoordinator.refloor_locked>`), unless the
        latest generation has no record yet. Durable logs write it down first."""
        start, generation = self.generations[-1]
        if start == self.end:
            return
        self.generations.append((self.end, generation + 1))
        if self.file is not None:
            self.file.save_generations(self.generations)

    def generation_runs(self, first: int, last: int) -> list[tuple[int, int]]:
        """The generations of offsets ``first .. last``: ``(first offset, generation)``."""
        runs: list[tuple[int, int]] = []
        for index, (start, generation) in enumerate(self.generations):
            following = (
                self.generations[index + 1][0] if index + 1 < len(self.generations) else None
            )
            if following is not None and following <= first:
                continue
            if start > last:
                break
            runs.append((max(start, first), generation))
        return runs

    @property
    def end(self) -> int:
        """The offset the next record will get (Kafka's high watermark / end offset)."""
        return self.base + len(self.records)

    def retained(self) -> int:
        """Records from ``start`` to the end: what counts against the log's capacity."""
        return self.base + len(self.records) - self.start

    def read(self, position: int, limit: int) -> list[Message]:
        """Up to ``limit`` records from ``position`` (or ``start``, if that is later)."""
        index = (position if position > self.start else self.start) - self.base
        return self.records[index : index + limit]

    def advance_start(self, offset: int) -> int:
        """Forget records below ``offset`` (capped at the end); return how many were forgotten."""
        offset = min(offset, self.end)
        if offset <= self.start:
            return 0
        released = offset - self.start
        self.start = offset
        dead = offset - self.base
        if dead >= _COMPACT_AT or 2 * dead >= len(self.records):
            del self.records[:dead]
            self.base = offset
        return released
