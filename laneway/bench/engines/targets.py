"""The logs a benchmark runs against: the embedded log (default) or a Kafka broker.

For every run a target creates a fresh topic (unique name), produces the whole backlog into
it *before* the consumer starts (so throughput measures consuming, not producing), hands out
a laneway source or a raw consume loop for a fresh consumer group, and removes the topic
afterwards. Message ``i`` has key ``k<i mod keys>`` (or with ``zipf`` keys, see
:mod:`laneway.bench.engines.key_spread`, a skewed draw) and a value starting with ``i`` in ten
ASCII digits (its sequence number), or with ``--value-format json|avro`` an order record
carrying it (see :mod:`laneway.bench.engines.value_formats`). On Kafka the producer is
idempotent (so the log itself holds each message once, in produce order per partition) and
uses the murmur2 partitioner, like the embedded log, so a key lands on the same partition
number on both.
"""

from __future__ import annotations

import contextlib
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Protocol

from confluent_kafka import KafkaError, KafkaException, Message, Producer
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic

from laneway.bench.engines.key_spread import UNIFORM, key_indexes
from laneway.bench.engines.raw import EmbeddedRawLoop, KafkaRawLoop, RawLoop
from laneway.bench.engines.scenarios import DEFAULT_TOPIC_PREFIX
from laneway.bench.engines.value_formats import deserializer, value_encoder
from laneway.bench.engines.workloads import encode_value
from laneway.sources.base import Source
from laneway.sources.embedded.log import EmbeddedLog
from laneway.sources.kafka.source import KafkaSource

REQUEST_TIMEOUT_S = 30.0
FLUSH_TIMEOUT_S = 120.0


class BenchSetupError(Exception):
    """The log could not be prepared for a run (topic creation or production failed)."""


@dataclass(frozen=True)
class Prepared:
    """A topic holding a run's backlog, and the consumer group that will read it."""

    topic: str
    group: str
    produced: int
    produce_s: float


def backlog(
    messages: int, keys: int, encode: Callable[[int], bytes] = encode_value, spread: str = UNIFORM
) -> Iterator[tuple[bytes, bytes]]:
    """``(key, value)`` of every message of a run, in sequence order (``encode``: the
    value of a sequence number; ``spread``: how keys spread over messages)."""
    for i, key in enumerate(key_indexes(messages, keys, spread)):
        yield b"k%d" % key, encode(i)


def unique_name(prefix: str, kind: str) -> str:
    return f"{prefix}-{kind}-{uuid.uuid4().hex[:10]}"


class Target(Protocol):
    """A log the bench can create topics in, produce to and consume from."""

    kind: str

    def prepare(
        self, prefix: str, partitions: int, messages: int, keys: int, spread: str = UNIFORM
    ) -> Prepared: ...

    def source(self, prepared: Prepared) -> Source: ...

    def raw_loop(
        self, prepared: Prepared, messages: int, out: str | None = None, count_only: bool = False
    ) -> RawLoop:
        """The raw loop over the run's topic; with ``out`` it also writes every message there
        (create it with :meth:`create_output` first); ``count_only``: the ceiling loop."""
        ...

    def create_output(self, prepared: Prepared, topic: str, compacted: bool = False) -> None:
        """Create ``topic`` with the partition count of the run's topic (results runs;
        ``compacted``: a state changelog), deleted with the run's topic."""
        ...

    def cleanup(self, prepared: Prepared) -> None: ...

    def describe(self) -> dict[str, Any]: ...


class EmbeddedTarget:
    """A fresh in-memory :class:`laneway.EmbeddedLog` per run (nothing carries over)."""

    kind = "embedded"

    def __init__(self, value_format: str = "bytes") -> None:
        self._logs: dict[str, EmbeddedLog] = {}
        self._encode = value_encoder(value_format)
        self._decode = deserializer(value_format)

    def prepare(
        self, prefix: str, partitions: int, messages: int, keys: int, spread: str = UNIFORM
    ) -> Prepared:
        topic = unique_name(DEFAULT_TOPIC_PREFIX, prefix)
        log = EmbeddedLog()
        log.create_topic(topic, partitions=partitions)
        started = time.perf_counter()
        produced = log.produce_many(topic, backlog(messages, keys, self._encode, spread))
        self._logs[topic] = log
        group = unique_name(DEFAULT_TOPIC_PREFIX, "group")
        return Prepared(topic, group, produced, time.perf_counter() - started)

    def source(self, prepared: Prepared) -> Source:
        return self._logs[prepared.topic].subscribe([prepared.topic], prepared.group)

    def raw_loop(
        self, prepared: Prepared, messages: int, out: str | None = None, count_only: bool = False
    ) -> RawLoop:
        log = self._logs[prepared.topic]
        source = self.source(prepared)
        return EmbeddedRawLoop(source, messages, log, out, self._decode, count_only)

    def create_output(self, prepared: Prepared, topic: str, compacted: bool = False) -> None:
        log = self._logs[prepared.topic]
        log.create_topic(topic, partitions=log.partitions(prepared.topic))

    def cleanup(self, prepared: Prepared) -> None:
        log = self._logs.pop(prepared.topic, None)
        if log is not None:
            log.close()

    def describe(self) -> dict[str, Any]:
        return {"kind": self.kind}


class KafkaTarget:
    """A Kafka broker: one topic (replication factor 1) per run, deleted afterwards."""

    kind = "kafka"

    def __init__(
        self,
        bootstrap_servers: str,
        topic_prefix: str = DEFAULT_TOPIC_PREFIX,
        value_format: str = "bytes",
    ) -> None:
        self.bootstrap_servers = bootstrap_servers
        self.topic_prefix = topic_prefix
        self._encode = value_encoder(value_format)
        self._decode = deserializer(value_format)
        self._admin = AdminClient({"bootstrap.servers": bootstrap_servers})
        self._outputs: dict[str, str] = {}

    def check(self) -> None:
        """Fail fast, with the address, when no broker answers."""
        try:
            self._admin.list_topics(timeout=5.0)
        except KafkaException as error:
            raise BenchSetupError(
                f"no Kafka broker answers at {self.bootstrap_servers}: {error}"
            ) from error

    def prepare(
        self, prefix: str, partitions: int, messages: int, keys: int, spread: str = UNIFORM
    ) -> Prepared:
        topic = unique_name(self.topic_prefix, prefix)
        self.create_topic(topic, partitions)
        started = time.perf_counter()
        produced = self.produce(topic, messages, keys, spread=spread)
        group = unique_name(self.topic_prefix, "group")
        return Prepared(topic, group, produced, time.perf_counter() - started)

    def source(self, prepared: Prepared) -> Source:
        return KafkaSource(
            bootstrap_servers=self.bootstrap_servers,
            group=prepared.group,
            topics=[prepared.topic],
        )

    def raw_loop(
        self, prepared: Prepared, messages: int, out: str | None = None, count_only: bool = False
    ) -> RawLoop:
        return KafkaRawLoop(
            self.bootstrap_servers,
            prepared.topic,
            prepared.group,
            messages,
            out,
            self._decode,
            count_only,
        )

    def create_output(self, prepared: Prepared, topic: str, compacted: bool = False) -> None:
        described = self._admin.list_topics(topic=prepared.topic, timeout=REQUEST_TIMEOUT_S)
        config = {"cleanup.policy": "compact"} if compacted else {}
        self.create_topic(topic, len(described.topics[prepared.topic].partitions), config)
        self._outputs[prepared.topic] = topic

    def cleanup(self, prepared: Prepared) -> None:
        topics = [prepared.topic]
        output = self._outputs.pop(prepared.topic, None)
        if output is not None:
            topics.append(output)
        self.delete_topics(topics)

    def delete_topic(self, topic: str) -> None:
        """Delete ``topic``, best effort: a leftover topic of a finished run harms no other."""
        self.delete_topics([topic])

    def delete_topics(self, topics: list[str]) -> None:
        """Delete ``topics``, best effort (see :meth:`delete_topic`)."""
        futures = self._admin.delete_topics(topics, request_timeout=REQUEST_TIMEOUT_S)
        for future in futures.values():
            with contextlib.suppress(KafkaException):
                future.result(timeout=REQUEST_TIMEOUT_S)

    def describe(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "bootstrap_servers": self.bootstrap_servers,
            "topic_prefix": self.topic_prefix,
        }

    def create_topic(
        self, topic: str, partitions: int, config: dict[str, str] | None = None
    ) -> None:
        """Create ``topic`` (with topic ``config``) and wait until every partition has a
        leader."""
        new = NewTopic(topic, num_partitions=partitions, replication_factor=1, config=config or {})
        futures = self._admin.create_topics([new], request_timeout=REQUEST_TIMEOUT_S)
        try:
            futures[topic].result(timeout=REQUEST_TIMEOUT_S)
        except KafkaException as error:
            raise BenchSetupError(f"cannot create topic {topic!r}: {error}") from error
        deadline = time.monotonic() + REQUEST_TIMEOUT_S
        while time.monotonic() < deadline:
            described = self._admin.list_topics(topic=topic, timeout=REQUEST_TIMEOUT_S).topics
            meta = described.get(topic)
            if (
                meta is not None
                and meta.error is None
                and len(meta.partitions) == partitions
                and all(p.leader >= 0 for p in meta.partitions.values())
            ):
                return
            time.sleep(0.1)
        raise BenchSetupError(f"topic {topic!r} got no leader within {REQUEST_TIMEOUT_S} s")

    def produce_to_partitions(self, topic: str, messages: int, partitions: int) -> int:
        """Message ``i`` (no key) into partition ``i % partitions``: every partition gets the
        same number, as when the seed's bus spreads events round robin."""
        return self._send(topic, ((None, encode_value(i), i % partitions) for i in range(messages)))

    def produce(
        self,
        topic: str,
        messages: int,
        keys: int,
        batch_messages: int = 10_000,
        spread: str = UNIFORM,
    ) -> int:
        """Write the backlog of ``messages`` (see :func:`backlog`) in record batches of at
        most ``batch_messages``; return how many were written."""
        pairs = backlog(messages, keys, self._encode, spread)
        records = ((key, value, None) for key, value in pairs)
        return self._send(topic, records, batch_messages)

    def _send(
        self,
        topic: str,
        records: Iterator[tuple[bytes | None, bytes, int | None]],
        batch_messages: int = 10_000,
    ) -> int:
        errors: list[str] = []

        def on_error(error: KafkaError | None, message: Message) -> None:
            if error is not None:
                errors.append(str(error))

        producer = Producer(
            {
                "bootstrap.servers": self.bootstrap_servers,
                "enable.idempotence": True,
                "linger.ms": 5,
                "batch.num.messages": batch_messages,
                "partitioner": "murmur2_random",
                "delivery.report.only.error": True,
                "on_delivery": on_error,
            }
        )
        sent = 0
        for key, value, partition in records:
            where = -1 if partition is None else partition  # -1: the partitioner decides
            for _ in range(1_000):
                try:
                    producer.produce(topic, value=value, key=key, partition=where)
                    sent += 1
                    break
                except BufferError:  # local queue full: serve delivery reports, then retry
                    producer.poll(0.1)
            else:
                raise BenchSetupError(f"the producer queue stayed full for topic {topic!r}")
        remaining = producer.flush(FLUSH_TIMEOUT_S)
        if remaining or errors:
            raise BenchSetupError(
                f"producing to {topic!r}: {remaining} undelivered, errors: {errors[:3]}"
            )
        return sent
