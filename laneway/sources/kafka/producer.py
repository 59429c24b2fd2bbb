"""KafkaProducer: the Producer protocol on a confluent-kafka producer that keeps order."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from confluent_kafka import KafkaError, KafkaException, Message, Producer
from confluent_kafka.admin import (  # type: ignore[attr-defined]
    AdminClient,
    ConfigResource,
    NewTopic,
    ResourceType,
)

from laneway.errors import AccessDeniedError, SourceError
from laneway.logs import get_logger
from laneway.producing.producer import Refusal, WriteFailure
from laneway.results import Produce
from laneway.sources.kafka.client_logs import (
    client_logging,
    describe,
    describe_error,
    kafka_error,
)
from laneway.sources.kafka.denials import Access, creating, is_permanent, writing

log = get_logger(__name__)

PRODUCER_MAX_BYTES = 1_000_000_000
"""librdkafka's largest ``message.max.bytes``."""
METADATA_TIMEOUT = 10.0
"""Seconds to wait for topic metadata or creation when a topic is first created."""


class KafkaProducer:
    """Writes records into the source's cluster, in order per partition.

    Settings: the source's connection settings (``bootstrap.servers``, ``security.*``,
    ``sasl.*``, ``ssl.*``, ``client.*``, ``socket.*``) plus ``acks=all``,
    ``linger.ms=0`` and one request in flight per broker
    (``max.in.flight.requests.per.connection=1``), so the producer's own retries never
    reorder records; ``message.max.bytes`` is raised to librdkafka's maximum because a
    copied record is as large as its original, and the target topic's own
    ``max.message.bytes`` is the real limit (:meth:`create_topic_like` copies it).

    Not idempotent (``enable.idempotence=false``): an idempotent producer asks the broker
    for a producer ID when it is created and, finding no connection up yet (the usual
    case for a producer opened on the first result), asks again only after librdkafka's
    500 ms retry timer, so every consumer's first round of results waited 0.5-1 s, its
    inputs filling the buffer meanwhile (measured: first round 510-1,007 ms idempotent,
    9-17 ms not; 1,000,000 results on the sync engine 154k/177k/221k -> 202k/246k/240k
    msg/s in three pairs). What idempotence adds, no duplicates from the producer's own
    retries, at-least-once does not promise: a request retried after a lost answer may
    write its records twice, as a crash before a commit writes results again. It also
    needs no write permission beyond the target topics.

    Writes are asynchronous: a record is acknowledged once it no longer counts in
    :attr:`unacknowledged` (librdkafka's queue length) without :meth:`poll`, which the
    writer calls while anything is unacknowledged, having handed it back as failed (only
    failures are reported, ``delivery.report.only.error``). A slow or failing target topic never
    blocks the partitions that have nothing to write.

    A write or topic creation the cluster refuses for good (a missing ACL, see
    :mod:`laneway.sources.kafka.denials`) raises
    :class:`~laneway.errors.AccessDeniedError` from :meth:`poll`, :meth:`produce` or
    :meth:`create_topic_like`: writing again cannot succeed.
    """

    def __init__(self, connection: dict[str, object], name: str = "kafka producer") -> None:
        settings = {
            **connection,
            "enable.idempotence": False,
            "max.in.flight.requests.per.connection": 1,
            # A writer queues a whole round of records at once and waits for all of them
            # (see AcknowledgedWrites): lingering would only make every round longer
            # (measured: rounds p50 ~9 ms at 5 ms, ~5 ms at 0; 500,000 results, two runs
            # each: sync 154k/136k -> 186k/148k msg/s, thread 90k/70k -> 102k/138k).
            "linger.ms": 0,
            "acks": "all",
            "message.max.bytes": PRODUCER_MAX_BYTES,
            # Failures only (see the Producer protocol): a success is known by the record
            # no longer counting in len(producer).
            "delivery.report.only.error": True,
            "on_delivery": self._delivered,
        }
        self._access = Access(settings)
        self._denied: AccessDeniedError | None = None
        client_logging(name, settings)
        self._producer = Producer(settings)
        admin_settings = dict(connection)
        client_logging(f"{name} (admin)", admin_settings)
        self._admin = AdminClient(admin_settings)  # type: ignore[arg-type]
        self._failures: list[WriteFailure] = []

    def produce(self, records: Sequence[Produce]) -> list[Refusal]:
        refused: list[Refusal] = []
        producer = self._producer
        queue = producer.produce
        for index, record in enumerate(records):
            topic, value, key, headers, partition = record
            try:
                if headers or partition is not None:
                    send(producer, record)
                else:  # inline: this loop runs for every result
                    queue(topic, value, key)
            except (KafkaException, BufferError) as error:
                self._note_refusal(kafka_error(error), topic)
                refused.append(Refusal(index, f"{type(error).__name__}: {describe(error)}"))
        if self._denied is not None:
            raise self._denied
        return refused

    @property
    def unacknowledged(self) -> int:
        return len(self._producer)

    def poll(self) -> list[WriteFailure]:
        self._producer.poll(0)
        failures, self._failures = self._failures, []
        if self._denied is not None:
            raise self._denied
        return failures

    def create_topic_like(self, topic: str, like: str) -> None:
        try:
            metadata = self._admin.list_topics(timeout=METADATA_TIMEOUT)
            existing = metadata.topics.get(topic)
            if existing is not None and existing.error is None:
                return
            source = metadata.topics.get(like)
            partitions = len(source.partitions) if source is not None else 1
            new_topic = NewTopic(topic, num_partitions=partitions, config=self._limits_of(like))
            futures = self._admin.create_topics([new_topic], request_timeout=METADATA_TIMEOUT)
            try:
                futures[topic].result(METADATA_TIMEOUT)
                log.info("created topic %s (%d partitions, like %s)", topic, partitions, like)
            except KafkaException as error:
                if error.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
                    raise
        except KafkaException as error:
            found = kafka_error(error)
            if found is not None and is_permanent(found):
                denial = self._access.refusal(found, creating(topic))
                raise denial or AccessDeniedError(describe(error)) from error
            raise SourceError(f"creating topic {topic!r} failed: {error}") from error

    def close(self, timeout: float) -> None:
        remaining = self._producer.flush(timeout)
        if remaining:
            log.warning("%d records were not acknowledged before close", remaining)

    def _delivered(self, error: KafkaError | None, message: Message) -> None:
        if error is not None:
            self._note_refusal(error, message.topic())
            self._failures.append(
                WriteFailure(
                    describe_error(error), message.topic() or "", message.key(), message.value()
                )
            )

    def _note_refusal(self, error: KafkaError | None, topic: str | None) -> None:
        """Keep the first permanent refusal of a write, for :meth:`poll` to raise."""
        if error is not None and self._denied is None and is_permanent(error):
            self._denied = self._access.refusal(error, writing(topic))

    def _limits_of(self, topic: str) -> dict[str, str]:
        """The source topic's ``max.message.bytes``, so every record of it fits the copy."""
        resource = ConfigResource(ResourceType.TOPIC, topic)
        try:
            described = self._admin.describe_configs([resource])[resource].result(METADATA_TIMEOUT)
        except KafkaException as error:
            log.warning("could not read %s's config for a topic like it: %s", topic, error)
            return {}
        entry = described.get("max.message.bytes")
        return {} if entry is None or entry.value is None else {"max.message.bytes": entry.value}


def send(producer: Producer, record: Produce) -> None:
    """Queue ``record`` on a confluent-kafka ``producer`` (raises as ``produce`` does); the
    producer's own delivery callback, if any, reports it.

    ``headers`` and ``partition`` are passed only when the record has them: either keyword,
    even empty or ``-1`` (librdkafka's "unassigned"), halves confluent-kafka's produce rate
    (measured: ~120k -> ~190-245k records/s, idempotent, a callback per record)."""
    headers, partition = record.headers, record.partition
    if not headers and partition is None:  # the common case, without a keywords dict
        producer.produce(record.topic, record.value, record.key)
        return
    extra: dict[str, Any] = {}
    if headers:
        extra["headers"] = list(headers)
    if partition is not None:
        extra["partition"] = partition
    producer.produce(record.topic, record.value, record.key, **extra)
