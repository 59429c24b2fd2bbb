"""Where the skew scenario writes and reads: a fresh embedded log, or a topic on a broker."""

from __future__ import annotations

from collections.abc import Iterable

from confluent_kafka import Producer

from laneway.bench.engines.targets import FLUSH_TIMEOUT_S, KafkaTarget, Target, unique_name
from laneway.sources.base import Source
from laneway.sources.embedded.log import EmbeddedLog
from laneway.sources.kafka.source import KafkaSource


class SkewLog:
    """One topic of ``partitions`` on the bench's target, written with explicit keys (on
    Kafka through one idempotent producer, murmur2 partitioner, as the embedded log
    places keys) and read by fresh groups."""

    def __init__(self, target: Target, name: str, partitions: int) -> None:
        self.topic = unique_name("laneway-bench-skew", name)
        self._kafka = target if isinstance(target, KafkaTarget) else None
        self._embedded: EmbeddedLog | None = None
        self._producer: Producer | None = None
        if self._kafka is not None:
            self._kafka.create_topic(self.topic, partitions)
            self._producer = Producer(
                {
                    "bootstrap.servers": self._kafka.bootstrap_servers,
                    "enable.idempotence": True,
                    "linger.ms": 2,
                    "partitioner": "murmur2_random",
                }
            )
        else:
            self._embedded = EmbeddedLog()
            self._embedded.create_topic(self.topic, partitions=partitions)

    def write(self, records: Iterable[tuple[bytes, bytes]]) -> int:
        """Write ``(key, value)`` records (on Kafka: handed to the producer, see
        :meth:`flush`); how many."""
        if self._embedded is not None:
            return self._embedded.produce_many(self.topic, records)
        producer = self._producer
        assert producer is not None
        count = 0
        for key, value in records:
            while True:
                try:
                    producer.produce(self.topic, value=value, key=key)
                    break
                except BufferError:
                    producer.poll(0.05)
            count += 1
        producer.poll(0)
        return count

    def flush(self) -> None:
        """Wait until every record written is in the log."""
        if self._producer is not None and self._producer.flush(FLUSH_TIMEOUT_S):
            raise RuntimeError(f"records for {self.topic} were not all delivered")

    def source(self, group: str) -> Source:
        if self._kafka is not None:
            return KafkaSource(self._kafka.bootstrap_servers, group, [self.topic])
        assert self._embedded is not None
        return self._embedded.subscribe([self.topic], group)

    def close(self) -> None:
        if self._kafka is not None:
            self._kafka.delete_topic(self.topic)
