"""The dead-letter topic a ``laneway dlq`` command reads, on Kafka or an embedded log.

A command reads the topic once, from a group's committed position (``replay``) or from
the start (``list``, ``show``: a group that is never committed), up to the log end as it
was when the command started: a dead letter written while it runs (a replayed record that
failed again) waits for the next run, so one run never reads a record twice.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Protocol

from laneway.errors import LanewayError, UnknownTopicError
from laneway.ops.connection import OpsError, Target, read_group
from laneway.ops.embedded_positions import open_log
from laneway.results import Produce
from laneway.service import exits
from laneway.sources.base import IgnoreRebalances
from laneway.sources.embedded.source import EmbeddedSource
from laneway.types import CommitPosition, Message

"""``list`` and ``show`` read with a group of this prefix and a random suffix, never
committed (so the cluster keeps no trace of it)."""


class DeadLetterLog(Protocol):
    """One dead-letter topic and the log around it, for one command run."""

    where: str
    topic: str

    def start(self, group: str | None) -> None:
        """Begin reading at ``group``'s committed position (``None``: from the start)."""

    def read(self, max_records: int) -> list[Message] | None:
        """The next records (maybe none yet); ``None`` once every partition is read up
        to the end it had when :meth:`start` was called."""

    def commit(self, positions: Mapping[int, int]) -> None:
        """Commit the next offset to read of each partition of the topic for the group."""

    def partitions(self, topic: str) -> int | None:
        """How many partitions ``topic`` has (``None``: no such topic)."""

    def write(self, records: Sequence[Produce]) -> list[tuple[int, str]]:
        """Write ``records`` and wait until the log has them all, but those it refused
        for good (a missing ACL on the topic, too large for it), returned as their index
        in ``records`` and why; any other failure raises."""

    def close(self) -> None: ...


def open_dead_letters(target: Target, topic: str) -> DeadLetterLog:
    """The dead-letter ``topic`` of ``target``; :class:`UnknownTopicError` if it is missing."""
    if target.log_dir is not None:
        return EmbeddedDeadLetters(target.log_dir, topic)
    from laneway.ops.dlq.kafka_letters import KafkaDeadLetters

    return KafkaDeadLetters(target, topic)


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
                f"unknown topic {topic!r} in {path} "
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

    def write(self, records: Sequence[Produce]) -> list[tuple[int, str]]:
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
                raise OpsError(
                    f"writing to {record.topic} failed: {error}", exits.FAILED
                ) from error
        return []

    def close(self) -> None:
        try:
            if self._source is not None:
                self._source.close()
        finally:
            self._log.close()
