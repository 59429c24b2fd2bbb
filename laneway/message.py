"""The message type every source yields and every handler receives."""

from __future__ import annotations

from collections.abc import Sequence

Header = tuple[str, "bytes | None"]
PartitionId = tuple[str, int]
"""A partition of a topic: ``(topic, partition)``."""


class Message:
    """One record read from a partitioned log.

    Attributes follow Kafka's record: ``topic``, ``partition``, ``offset``, ``key`` and
    ``value`` (bytes or ``None``), ``headers`` (a sequence of ``(name, bytes | None)``)
    and ``timestamp`` (milliseconds since the epoch, as the producer or log set it).

    Messages are plain slotted objects, cheap to create in bulk and picklable as tuples
    (the process engine ships them to workers in batches).
    """

    __slots__ = ("headers", "key", "offset", "partition", "timestamp", "topic", "value")

    def __init__(
        self,
        topic: str,
        partition: int,
        offset: int,
        key: bytes | None,
        value: bytes | None,
        headers: Sequence[Header] = (),
        timestamp: int = 0,
    ) -> None:
        self.topic = topic
        self.partition = partition
        self.offset = offset
        self.key = key
        self.value = value
        self.headers = headers
        self.timestamp = timestamp

    def as_tuple(self) -> tuple[str, int, int, bytes | None, bytes | None, Sequence[Header], int]:
        return (
            self.topic,
            self.partition,
            self.offset,
            self.key,
            self.value,
            self.headers,
            self.timestamp,
        )

    def __reduce__(self) -> tuple[type[Message], tuple[object, ...]]:
        return (Message, self.as_tuple())

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Message) and self.as_tuple() == other.as_tuple()

    def __hash__(self) -> int:
        return hash((self.topic, self.partition, self.offset))

    def __repr__(self) -> str:
        return (
            f"Message(topic={self.topic!r}, partition={self.partition}, offset={self.offset}, "
            f"key={self.key!r}, value={_short(self.value)}, timestamp={self.timestamp})"
        )


def _short(value: bytes | None) -> str:
    if value is None or len(value) <= 32:
        return repr(value)
    return f"{value[:32]!r}...({len(value)} bytes)"
