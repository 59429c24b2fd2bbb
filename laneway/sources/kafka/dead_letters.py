"""A dead-letter topic on Kafka: read by a consumer that assigns itself every partition
(it never joins the group, so nothing rebalances under a replay) and writes through an
idempotent producer (no duplicates from the producer's own retries, order kept).

Reading stops at each partition's high watermark as of :meth:`KafkaDeadLetters.start`,
or earlier at the end a ``read_committed`` reader sees (records of a transaction still
open when the command runs wait for the next run). Two replays with the same group at
once would both write: run one at a time.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka import Message as KafkaMessage

from laneway.errors import AccessDeniedError, ConfigError, SourceError, WriteError
from laneway.results import Produce
from laneway.sources.kafka.checks import check_topics
from laneway.sources.kafka.client_config import connection_subset
from laneway.sources.kafka.client_logs import client_logging, describe, describe_error
from laneway.sources.kafka.denials import Access, consuming, writing
from laneway.sources.kafka.group_positions import new_admin
from laneway.sources.kafka.messages import messages_of
from laneway.sources.kafka.producer import PRODUCER_MAX_BYTES
from laneway.sources.targets import Target, read_group
from laneway.types import Message

WRITE_TIMEOUT = 60.0
"""Seconds a batch of writes may take to be acknowledged before the run fails (nothing
of that batch is committed, so the next run writes it again)."""
STUCK_AFTER = 60.0
"""Seconds without a record or an end-of-partition event before a read fails."""
_EOF = KafkaError._PARTITION_EOF


class KafkaDeadLetters:
    """The :class:`~laneway.sources.targets.DeadLetterLog` of a Kafka cluster.

    Tuning: requests wait up to the ``connect_timeout`` setting; a batch of writes up to
    :data:`WRITE_TIMEOUT`; the connection settings come from the ``[kafka]`` table."""

    def __init__(self, target: Target, topic: str) -> None:
        self.where = str(target.bootstrap_servers)
        self.topic = topic
        self._timeout = target.connect_timeout
        self._connection: dict[str, object] = {
            **connection_subset(target.kafka),
            "bootstrap.servers": target.bootstrap_servers,
        }
        self._access = Access(target.kafka)
        self._admin = new_admin(target, f"laneway dlq {self.where}")
        check_topics(self._admin, [topic], self._timeout, self._access)
        self._counts: dict[str, int | None] = {}
        self._consumer: Consumer | None = None
        self._producer: Producer | None = None
        self._group = ""
        self._ends: dict[int, int] = {}
        self._pending: set[int] = set()
        self._last_progress = time.monotonic()
        self._failures: list[tuple[KafkaError, str]] = []

    def start(self, group: str | None) -> None:
        self._group = group or read_group()
        config: dict[str, object] = {
            **self._connection,
            "group.id": self._group,
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            "enable.partition.eof": True,
            "auto.offset.reset": "earliest",
            "allow.auto.create.topics": False,
        }
        client_logging(f"laneway dlq reader {self.where}", config)
        self._consumer = consumer = _client(Consumer, config)
        count = self.partitions(self.topic) or 0
        partitions = [TopicPartition(self.topic, p) for p in range(count)]
        try:
            committed = consumer.committed(partitions, timeout=self._timeout) if group else []
            marks = {
                tp.partition: consumer.get_watermark_offsets(tp, timeout=self._timeout)
                for tp in partitions
            }
        except KafkaException as exc:
            raise self._refusal(exc) or SourceError(
                f"reading the positions of {self.topic} on {self.where} failed: {describe(exc)}"
            ) from exc
        starts = {p: low for p, (low, _) in marks.items()}
        for tp in committed:
            if tp.error is not None:
                raise self._refusal(KafkaException(tp.error)) or SourceError(
                    f"reading group {self._group!r}'s offsets failed: {describe_error(tp.error)}"
                )
            if tp.offset >= 0:
                starts[tp.partition] = max(tp.offset, starts[tp.partition])
        self._ends = {p: high for p, (_, high) in marks.items()}
        self._pending = {p for p in starts if starts[p] < self._ends[p]}
        consumer.assign([TopicPartition(self.topic, p, starts[p]) for p in sorted(self._pending)])
        self._last_progress = time.monotonic()

    def read(self, max_records: int) -> list[Message] | None:
        consumer = self._consumer
        assert consumer is not None, "start() first"
        if not self._pending:
            return None
        try:
            batch = consumer.consume(max_records, 0.5)
        except KafkaException as exc:
            raise self._refusal(exc) or SourceError(f"reading failed: {describe(exc)}") from exc
        records: list[KafkaMessage] = []
        for record in batch:
            partition, error, offset = record.partition(), record.error(), record.offset()
            if error is not None and error.code() != _EOF:
                self._raise_unless_transient(error)
                continue
            if partition not in self._pending or offset is None:
                continue
            self._last_progress = time.monotonic()
            if error is None and offset < self._ends[partition]:
                records.append(record)
            if error is not None or offset + 1 >= self._ends[partition]:
                self._pending.discard(partition)
                consumer.pause([TopicPartition(self.topic, partition)])
        if time.monotonic() - self._last_progress > STUCK_AFTER:
            raise SourceError(
                f"reading {self.topic} on {self.where}: nothing arrived for {STUCK_AFTER:g} s "
                f"from partitions {sorted(self._pending)}"
            )
        return messages_of(records, self._raise_unless_transient)

    def commit(self, positions: Mapping[int, int]) -> None:
        consumer = self._consumer
        assert consumer is not None, "start() first"
        offsets = [TopicPartition(self.topic, p, o) for p, o in sorted(positions.items())]
        try:
            results = consumer.commit(offsets=offsets, asynchronous=False)
        except KafkaException as exc:
            raise self._refusal(exc) or SourceError(
                f"committing group {self._group!r} failed: {describe(exc)} (is another "
                "consumer using this group?)"
            ) from exc
        for tp in results or []:
            if tp.error is not None:
                raise self._refusal(KafkaException(tp.error)) or SourceError(
                    f"committing group {self._group!r} failed for {tp.topic}[{tp.partition}]: "
                    f"{describe_error(tp.error)}"
                )

    def partitions(self, topic: str) -> int | None:
        if topic not in self._counts:
            try:
                metadata = self._admin.list_topics(topic=topic, timeout=self._timeout)
            except KafkaException as exc:
                raise SourceError(f"reading the metadata of {topic!r}: {describe(exc)}") from exc
            found = metadata.topics.get(topic)
            usable = found is not None and found.error is None and bool(found.partitions)
            self._counts[topic] = len(found.partitions) if found is not None and usable else None
        return self._counts[topic]

    def write(self, records: Sequence[Produce]) -> None:
        producer = self._producer or self._new_producer()
        for record in records:
            extra: dict[str, Any] = {"headers": list(record.headers or ())}
            if record.partition is not None:
                extra["partition"] = record.partition
            while True:
                try:
                    producer.produce(record.topic, record.value, record.key, **extra)
                    break
                except BufferError:
                    producer.poll(0.1)
        remaining = producer.flush(WRITE_TIMEOUT)
        failures, self._failures = self._failures, []
        for error, topic in failures:
            denial = self._access.refusal(error, writing(topic))
            if denial is not None:
                raise denial
        if remaining or failures:
            why = describe_error(failures[0][0]) if failures else "no acknowledgement in time"
            raise WriteError(
                f"{len(failures) + remaining} of {len(records)} records were not written "
                f"({why}); this batch is not committed: run the same command again to resume"
            )

    def close(self) -> None:
        if self._producer is not None:
            self._producer.flush(WRITE_TIMEOUT)
        if self._consumer is not None:
            self._consumer.close()

    def _new_producer(self) -> Producer:
        config: dict[str, object] = {
            **self._connection,
            "enable.idempotence": True,
            "acks": "all",
            "linger.ms": 5,
            "message.max.bytes": PRODUCER_MAX_BYTES,
            "allow.auto.create.topics": False,
            "on_delivery": self._delivered,
        }
        client_logging(f"laneway dlq writer {self.where}", config)
        self._producer = _client(Producer, config)
        return self._producer

    def _delivered(self, error: KafkaError | None, record: KafkaMessage) -> None:
        if error is not None:
            self._failures.append((error, record.topic() or ""))

    def _refusal(self, exc: KafkaException) -> AccessDeniedError | None:
        error = exc.args[0] if exc.args else None
        if not isinstance(error, KafkaError):
            return None
        return self._access.refusal(error, consuming(self._group, [self.topic]))

    def _raise_unless_transient(self, error: KafkaError) -> None:
        denial = self._access.refusal(error, consuming(self._group, [self.topic]))
        if denial is not None:
            raise denial
        if error.fatal():
            raise SourceError(f"reading {self.topic}: fatal error: {describe_error(error)}")


def _client(kind: Any, config: dict[str, object]) -> Any:
    try:
        return kind(config)
    except (KafkaException, ValueError, TypeError) as exc:
        raise ConfigError(f"the [kafka] settings are not valid for librdkafka: {exc}") from exc
