"""Dead letters on Kafka: an idempotent producer into ``<topic>.dlq``-style topics."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence

from confluent_kafka import KafkaError, KafkaException, Producer
from confluent_kafka.admin import (  # type: ignore[attr-defined]
    AdminClient,
    ConfigResource,
    NewTopic,
    ResourceType,
)

from laneway.types import Header, Message

log = logging.getLogger(__name__)

Done = Callable[[str | None], None]

PRODUCER_MAX_BYTES = 1_000_000_000
"""librdkafka's largest ``message.max.bytes``."""
METADATA_TIMEOUT = 10.0
"""Seconds to wait for topic metadata or creation when a dead-letter topic is first used."""


class KafkaDeadLetters:
    """Writes dead letters with an idempotent producer of the source's cluster.

    A dead-letter topic that does not exist is created on first use with the partition
    count of the source topic (replication: the broker's default). Writes are
    asynchronous; acknowledgements are handed back through :meth:`poll`, which the
    consumer calls every loop, so a slow or failing dead-letter topic never blocks the
    partitions that have nothing to dead-letter.
    """

    def __init__(self, connection: dict[str, object]) -> None:
        self._producer = Producer(
            {
                **connection,
                "enable.idempotence": True,
                "linger.ms": 5,
                "acks": "all",
                # A dead letter is as large as the record that failed; the topic's own
                # max.message.bytes (copied from the source topic) is the real limit.
                "message.max.bytes": PRODUCER_MAX_BYTES,
            }
        )
        self._admin = AdminClient(connection)  # type: ignore[arg-type]
        self._ready_topics: set[str] = set()
        self._deferred: list[tuple[Done, str | None]] = []

    def write(self, topic: str, message: Message, headers: Sequence[Header], done: Done) -> None:
        try:
            self._ensure_topic(topic, message.topic)
            self._producer.produce(
                topic,
                value=message.value,
                key=message.key,
                headers=list(headers),
                on_delivery=lambda error, _record: done(_describe(error)),
            )
        except (KafkaException, BufferError) as error:
            self._deferred.append((done, f"{type(error).__name__}: {error}"))

    def poll(self) -> None:
        self._producer.poll(0)
        self._run_deferred()

    def close(self, timeout: float) -> None:
        remaining = self._producer.flush(timeout)
        if remaining:
            log.warning("%d dead letters were not acknowledged before close", remaining)
        self._run_deferred()

    def _run_deferred(self) -> None:
        deferred, self._deferred = self._deferred, []
        for done, error in deferred:
            done(error)

    def _ensure_topic(self, topic: str, like: str) -> None:
        if topic in self._ready_topics:
            return
        metadata = self._admin.list_topics(timeout=METADATA_TIMEOUT)
        existing = metadata.topics.get(topic)
        if existing is None or existing.error is not None:
            source = metadata.topics.get(like)
            partitions = len(source.partitions) if source is not None else 1
            new_topic = NewTopic(topic, num_partitions=partitions, config=self._limits_of(like))
            futures = self._admin.create_topics([new_topic], request_timeout=METADATA_TIMEOUT)
            try:
                futures[topic].result(METADATA_TIMEOUT)
                log.info("created dead-letter topic %s (%d partitions)", topic, partitions)
            except KafkaException as error:
                if error.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
                    raise
        self._ready_topics.add(topic)

    def _limits_of(self, topic: str) -> dict[str, str]:
        """The source topic's ``max.message.bytes``, so every record of it fits its DLQ."""
        resource = ConfigResource(ResourceType.TOPIC, topic)
        try:
            described = self._admin.describe_configs([resource])[resource].result(METADATA_TIMEOUT)
        except KafkaException as error:
            log.warning("could not read %s's config for its dead-letter topic: %s", topic, error)
            return {}
        entry = described.get("max.message.bytes")
        return {} if entry is None or entry.value is None else {"max.message.bytes": entry.value}


def _describe(error: KafkaError | None) -> str | None:
    return None if error is None else f"{error.name()}: {error.str()}"
