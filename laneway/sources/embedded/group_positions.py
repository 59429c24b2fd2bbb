"""A group's positions and the log ends in a durable embedded log directory.

An embedded log belongs to one process at a time (it holds a lock on its directory), so
the ops commands can read it only while no ``laneway run --log-dir`` has it open.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from laneway.errors import SourceError, UnknownTopicError
from laneway.sources.embedded.log import EmbeddedLog
from laneway.sources.topic_names import unknown_topics
from laneway.types import CommitPosition, PartitionId


def open_log(path: Path) -> EmbeddedLog:
    """The durable embedded log at ``path``; :class:`~laneway.errors.SourceError` when
    there is none or another process has it open. Never creates a log."""
    if not (path / "@meta").is_dir():
        raise SourceError(f"--log-dir {path}: not an embedded log directory")
    try:
        return EmbeddedLog(path)
    except SourceError as error:
        raise SourceError(
            f"--log-dir {path}: {error} (a process such as laneway run holds it; stop it "
            "first, an embedded log belongs to one process at a time)"
        ) from error


class EmbeddedPositions:
    """The :class:`~laneway.sources.targets.Positions` of a durable embedded log."""

    def __init__(self, path: Path) -> None:
        self.where = str(path)
        self._log = open_log(path)

    def check_topics(self, topics: Sequence[str]) -> None:
        known = set(self._log.topics())
        missing = [t for t in topics if t not in known]
        if missing:
            raise UnknownTopicError(
                f"{unknown_topics(missing, known)} in {self.where} "
                f"(topics: {', '.join(sorted(known)) or 'none'})"
            )

    def group_exists(self, group: str) -> bool:
        return bool(self.committed(group, ()))

    def committed(self, group: str, topics: Sequence[str]) -> dict[PartitionId, CommitPosition]:
        return {
            (topic, partition): position
            for topic in topics or self._log.topics()
            for partition, position in self._log.committed(group, topic).items()
        }

    def assigned(self, group: str) -> set[PartitionId]:
        """None: no other process can be reading the log while this one has it open."""
        return set()

    def partitions(self, topics: Sequence[str]) -> list[PartitionId]:
        return [(t, p) for t in topics for p in range(self._log.partitions(t))]

    def ends(self, partitions: Sequence[PartitionId]) -> dict[PartitionId, int]:
        return self._of(partitions, self._log.end_offsets)

    def starts(self, partitions: Sequence[PartitionId]) -> dict[PartitionId, int]:
        return self._of(partitions, self._log.start_offsets)

    def _of(
        self, partitions: Sequence[PartitionId], read: Callable[[str], dict[int, int]]
    ) -> dict[PartitionId, int]:
        by_topic: dict[str, dict[int, int]] = {}
        found: dict[PartitionId, int] = {}
        for topic, partition in partitions:
            if topic not in by_topic:
                by_topic[topic] = read(topic)
            found[(topic, partition)] = by_topic[topic][partition]
        return found

    def close(self) -> None:
        self._log.close()
