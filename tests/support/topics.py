"""One interface over an embedded-log topic and a real Kafka topic, for end-to-end tests."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol

import kafka_helpers
import pytest
from confluent_kafka import Consumer, TopicPartition

import laneway
from laneway.sources.base import Source
from laneway.types import CommitPosition, PartitionId

Record = tuple[bytes | None, bytes] | tuple[bytes | None, bytes, list[tuple[str, bytes | None]]]
"""``(key, value)`` or ``(key, value, headers)``."""

SOURCES = ["embedded", pytest.param("kafka", marks=pytest.mark.kafka)]
"""Parametrize a test over both sources (use with the ``make_topic`` fixture)."""


class LogTopic(Protocol):
    name: str

    def produce(self, records: Sequence[Record]) -> list[tuple[int, int]]:
        """Write records; return each one's ``(partition, offset)``."""
        ...

    def source(self, group: str) -> Source: ...

    def end_offsets(self) -> dict[int, int]: ...

    def committed(self, group: str) -> dict[int, tuple[int, str]]: ...

    def read(self, topic: str, count: int) -> list[ReadBack]: ...

    def create(self, topic: str, partitions: int) -> None:
        """Create another topic in the same log."""
        ...


ReadBack = tuple[bytes | None, bytes | None, list[tuple[str, bytes | None]]]
"""A record read back from any topic of the log: key, value, headers."""


class EmbeddedTopic:
    def __init__(self, partitions: int) -> None:
        self.log = laneway.EmbeddedLog()
        self.name = "orders"
        self.log.create_topic(self.name, partitions=partitions)

    def produce(self, records: Sequence[Record]) -> list[tuple[int, int]]:
        return [
            self.log.produce(self.name, value=r[1], key=r[0], headers=r[2] if len(r) > 2 else None)
            for r in records
        ]

    def source(self, group: str) -> Source:
        return self.log.subscribe([self.name], group=group)

    def create(self, topic: str, partitions: int) -> None:
        self.log.create_topic(topic, partitions=partitions)

    def end_offsets(self) -> dict[int, int]:
        return self.log.end_offsets(self.name)

    def committed(self, group: str) -> dict[int, tuple[int, str]]:
        return {p: (c.offset, c.metadata) for p, c in self.log.committed(group, self.name).items()}

    def read(self, topic: str, count: int) -> list[ReadBack]:
        if topic not in self.log.topics():
            return []
        source = self.log.subscribe([topic], group=f"reader-{len(self.log.topics())}-{id(self)}")
        source.open(AssignmentListener())
        out: list[ReadBack] = []
        for _ in range(50):
            out += [(m.key, m.value, list(m.headers)) for m in source.poll(count, 0.05)]
            if len(out) >= count:
                break
        source.close()
        return out


class KafkaTopic:
    def __init__(self, bootstrap: str, partitions: int) -> None:
        self.bootstrap = bootstrap
        self.name = kafka_helpers.unique_name("orders")
        kafka_helpers.create_topic(bootstrap, self.name, partitions)

    def produce(self, records: Sequence[Record]) -> list[tuple[int, int]]:
        return kafka_helpers.produce(self.bootstrap, self.name, records)

    def source(self, group: str) -> Source:
        return laneway.KafkaSource(
            bootstrap_servers=self.bootstrap, group=group, topics=[self.name]
        )

    def end_offsets(self) -> dict[int, int]:
        return kafka_helpers.end_offsets(self.bootstrap, self.name)

    def create(self, topic: str, partitions: int) -> None:
        kafka_helpers.create_topic(self.bootstrap, topic, partitions)

    def committed(self, group: str) -> dict[int, tuple[int, str]]:
        return kafka_helpers.committed_offsets(self.bootstrap, group, self.name)

    def read(self, topic: str, count: int) -> list[ReadBack]:
        try:
            kafka_helpers.partition_ids(self.bootstrap, topic)
        except LookupError:
            return []
        records = kafka_helpers.read_records(self.bootstrap, topic, count)
        return [(r.key, r.value, r.headers) for r in records]


class AssignmentListener:
    """A rebalance listener that only remembers the positions it was assigned with."""

    def __init__(self) -> None:
        self.assigned: dict[PartitionId, CommitPosition | None] = {}

    def on_assigned(self, positions: Mapping[PartitionId, CommitPosition | None]) -> None:
        self.assigned.update(positions)

    def on_revoked(self, partitions: Sequence[PartitionId]) -> None:
        pass

    def on_lost(self, partitions: Sequence[PartitionId]) -> None:
        pass


def commit_by_hand(topic: LogTopic, group: str, offset: int, metadata: str) -> None:
    """Commit ``offset`` with ``metadata`` on partition 0 for ``group``, as another tool (or
    a member of another laneway release) would: a plain confluent-kafka consumer's commit
    on the real broker, a plain EmbeddedSource's commit on the embedded log."""
    if isinstance(topic, KafkaTopic):
        consumer = Consumer(
            {"bootstrap.servers": topic.bootstrap, "group.id": group, "enable.auto.commit": False}
        )
        try:
            [result] = consumer.commit(
                offsets=[TopicPartition(topic.name, 0, offset, metadata=metadata)],
                asynchronous=False,
            )
            assert result.error is None
        finally:
            consumer.close()
        return
    assert isinstance(topic, EmbeddedTopic)
    source = topic.log.subscribe([topic.name], group=group)
    source.open(AssignmentListener())
    source.poll(1, 0.0)  # the assignment
    source.commit({(topic.name, 0): CommitPosition(offset, metadata)})
    source.close()
