"""The message type every source yields and every handler receives."""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

Header = tuple[str, "bytes | None"]
PartitionId = tuple[str, int]
"""A partition of a topic: ``(topic, partition)``."""


class Message(NamedTuple):
    """One record read from a partitioned log.

    Attributes follow Kafka's record: ``topic``, ``partition``, ``offset``, ``key`` and
    ``value`` (bytes or ``None``), ``headers`` (a sequence of ``(name, bytes | None)``)
    and ``timestamp`` (milliseconds since the epoch, as the producer or log set it).

    A message is an immutable named tuple: creating one is a single C call, reading an
    attribute is as fast as Python gets, and it pickles as a plain tuple — all of which
    count when a consumer moves hundreds of thousands of them a second.
    """

    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: Sequence[Header] = ()
    timestamp: int = 0

    def __repr__(self) -> str:
        return (
            f"Message(topic={self.topic!r}, partition={self.partition}, offset={self.offset}, "
            f"key={self.key!r}, value={_short(self.value)}, timestamp={self.timestamp})"
        )


def _short(value: bytes | None) -> str:
    if value is None or len(value) <= 32:
        return repr(value)
    return f"{value[:32]!r}...({len(value)} bytes)"
