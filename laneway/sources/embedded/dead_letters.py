"""A dead-letter topic of a durable embedded log, read (and written, by a replay) for one
``laneway dlq`` command: the :class:`~laneway.sources.targets.DeadLetterLog` of the
embedded log. Nobody else writes the log while the command has it open (it belongs to one
process at a time), so the end it had at :meth:`EmbeddedDeadLetters.start` is the end.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from laneway.errors import LanewayError, UnknownTopicError, WriteError
from laneway.results import Produce
from laneway.sources.base import IgnoreRebalances
from laneway.sources.embedded.group_positions import open_log
from laneway.sources.embedded.source import EmbeddedSource
from laneway.sources.targets import read_group
from laneway.sources.topic_names import unknown_topics
from laneway.types import CommitPosition, Message


class EmbeddedDeadLetters:
    """A dead-letter topic of a durable embedded log (opened for this command alone)."""

    def __init__(self, path: Path, topic: str) -> None:
        self.where = str(path)
        self.topic = topic
        self._log = open_log(path)
        self._source: EmbeddedSource | None = None
        self._ends: dict[int, int] = {}
        if topic not in self._log.topics():
            self._log.close()
            raise UnknownTopicError(
                f"{unknown_topics([topic], self._log.topics())} in {path} "
                f"(topics: {', '.join(self._log.topics()) or 'none'})"
            )

    def start(self, group: str | None) -> None:
        self._ends = self._log.end_offsets(self.topic)
        self._source = self._log.subscribe([self.topic], group or read_group())
        self._source.open(IgnoreRebalances())

    def read(self, max_records: int) -> list[Message] | None:
        assert self._source is not None, "start() first"
        batch = self._source.poll(max_records, 0.05)
        if not batch:
            return None  # nobody else writes this log: nothing more is coming
        ends = self._ends
        return [m for m in batch if m.offset < ends.get(m.partition, 0)]

    def commit(self, positions: Mapping[int, int]) -> None:
        assert self._source is not None, "start() first"
        self._source.commit({(self.topic, p): CommitPosition(o) for p, o in positions.items()})

    def partitions(self, topic: str) -> int | None:
        return self._log.partitions(topic) if topic in self._log.topics() else None

    def write(self, records: Sequence[Produce]) -> None:
        for record in records:
            try:
                self._log.produce(
                    record.topic,
                    value=record.value,
                    key=record.key,
                    headers=record.headers,
                    partition=record.partition,
                )
            except LanewayError as error:
                raise WriteError(f"writing to {record.topic} failed: {error}") from error

    def close(self) -> None:
        try:
            if self._source is not None:
                self._source.close()
        finally:
            self._log.close()
