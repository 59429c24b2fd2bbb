"""EmbeddedProducer: the Producer protocol on an EmbeddedLog."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from laneway.producing.producer import Refusal, WriteFailure
from laneway.results import Produce

WRITE_TIMEOUT = 1.0
"""Seconds an append may wait for room in a bounded log before it counts as failed."""


class _Log(Protocol):
    """The part of :class:`~laneway.EmbeddedLog` a producer uses."""

    def produce_records(
        self, records: Sequence[Produce], timeout: float | None = None
    ) -> list[tuple[int, str]]: ...

    def create_topic(self, name: str, partitions: int = 1) -> None: ...

    def topics(self) -> list[str]: ...

    def partitions(self, topic: str) -> int: ...


class EmbeddedProducer:
    """Appends records to the same :class:`~laneway.EmbeddedLog` a source reads.

    Appends happen at once, so nothing is ever :attr:`unacknowledged`: a record the log
    refuses (an unknown topic, a full log) is refused by :meth:`produce` at once. In a bounded log
    (``capacity``) an append waits up to ``WRITE_TIMEOUT`` seconds for room and then counts
    as failed (the caller writes it again later): subscribe a group to the topics written
    to, or they fill up.
    """

    def __init__(self, log: _Log) -> None:
        self._log = log

    def produce(self, records: Sequence[Produce]) -> list[Refusal]:
        """Append the whole round under one lock (a call per record took about twice as
        long); a record the log does not keep is refused."""
        refused = self._log.produce_records(records, WRITE_TIMEOUT)
        return [Refusal(index, error) for index, error in refused]

    @property
    def unacknowledged(self) -> int:
        return 0

    def poll(self) -> list[WriteFailure]:
        return []

    def create_topic_like(self, topic: str, like: str) -> None:
        if topic not in self._log.topics():
            self._log.create_topic(topic, partitions=self._log.partitions(like))

    def close(self, timeout: float) -> None:
        """Nothing to wait for: every append is done."""
