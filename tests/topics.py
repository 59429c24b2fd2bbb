"""One interface over an embedded-log topic and a real Kafka topic, for end-to-end tests."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import kafka_helpers

import laneway
from laneway.sources.base import Source

Record = tuple[bytes | None, bytes]


class LogTopic(Protocol):
    name: str

    def produce(self, records: Sequence[Record]) -> None: ...

    def source(self, group: str) -> Source: ...

    def end_offsets(self) -> dict[int, int]: ...

    def committed(self, group: str) -> dict[int, tuple[int, str]]: ...


class EmbeddedTopic:
    def __init__(self, partitions: int) -> None:
        self.log = laneway.EmbeddedLog()
        self.name = "orders"
        self.log.create_topic(self.name, partitions=partitions)

    def produce(self, records: Sequence[Record]) -> None:
        for key, value in records:
            self.log.produce(self.name, value=value, key=key)

    def source(self, group: str) -> Source:
        return self.log.subscribe([self.name], group=group)

    def end_offsets(self) -> dict[int, int]:
        return self.log.end_offsets(self.name)

    def committed(self, group: str) -> dict[int, tuple[int, str]]:
        return {p: (c.offset, c.metadata) for p, c in self.log.committed(group, self.name).items()}


class KafkaTopic:
    def __init__(self, bootstrap: str, partitions: int) -> None:
        self.bootstrap = bootstrap
        self.name = kafka_helpers.unique_name("orders")
        kafka_helpers.create_topic(bootstrap, self.name, partitions)

    def produce(self, records: Sequence[Record]) -> None:
        kafka_helpers.produce(self.bootstrap, self.name, records)

    def source(self, group: str) -> Source:
        return laneway.KafkaSource(
            bootstrap_servers=self.bootstrap, group=group, topics=[self.name]
        )

    def end_offsets(self) -> dict[int, int]:
        return kafka_helpers.end_offsets(self.bootstrap, self.name)

    def committed(self, group: str) -> dict[int, tuple[int, str]]:
        return kafka_helpers.committed_offsets(self.bootstrap, group, self.name)
