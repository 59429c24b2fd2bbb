"""EmbeddedProducer: the Producer protocol on an EmbeddedLog."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Protocol

from laneway.errors import LanewayError
from laneway.producing.producer import Refusal, WriteFailure
from laneway.results import Produce
from laneway.types import Header

WRITE_TIMEOUT = 1.0
"""Seconds an append may wait for room in a bounded log before it counts as failed."""


class _Log(Protocol):
    """The part of :class:`~laneway.EmbeddedLog` a producer uses."""

    def produce(
        self,
        topic: str,
        value: bytes | None = None,
        key: bytes | None = None,
        headers: Iterable[Header] | None = None,
        timestamp: int | None = None,
        partition: int | None = None,
        timeout: float | None = None,
    ) -> tuple[int, int]: ...

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
        refused: list[Refusal] = []
        for index, record in enumerate(records):
            try:
                _, offset = self._log.produce(
                    record.topic,
                    value=record.value,
                    key=record.key,
                    headers=record.headers,
                    partition=record.partition,
                    timeout=WRITE_TIMEOUT,
                )
            except LanewayError as error:
                refused.append(Refusal(index, f"{type(error).__name__}: {error}"))
                continue
            if offset < 0:
                refused.append(Refusal(index, f"dropped: {record.topic} is full"))
        return refused

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
