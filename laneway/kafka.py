"""Conveniences for starting on Kafka: create a topic, produce records, wait for both.

For scripts, examples and tests; a service in production has its own producer. Both
calls talk to the cluster with the same logging as laneway's consumers (see
:mod:`laneway.sources.kafka.client_logs`) and fail with :class:`~laneway.errors.SourceError`
naming what went wrong.

::

    import laneway.kafka

    laneway.kafka.create_topic("127.0.0.1:9092", "orders", partitions=8)
    laneway.kafka.produce("127.0.0.1:9092", "orders", [(b"acct-1", b"10.00"), ...])
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from functools import partial

from confluent_kafka import KafkaError, KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

from laneway.errors import SourceError
from laneway.sources.kafka.client_config import NO_AUTO_CREATE
from laneway.sources.kafka.client_logs import client_logging, describe, describe_error
from laneway.types import Header

Record = tuple[bytes | None, bytes | None] | tuple[bytes | None, bytes | None, list[Header]]
"""``(key, value)`` or ``(key, value, headers)``."""


def create_topic(
    bootstrap_servers: str,
    topic: str,
    partitions: int = 1,
    replication_factor: int = 1,
    config: Mapping[str, str] | None = None,
    timeout: float = 30.0,
) -> bool:
    """Create ``topic`` unless it exists; True when it was created. Returns once every
    partition has a leader that answers, so a produce right after it succeeds."""
    settings: dict[str, object] = {"bootstrap.servers": bootstrap_servers, **NO_AUTO_CREATE}
    client_logging(f"kafka:{bootstrap_servers} admin", settings)
    admin = AdminClient(settings)  # type: ignore[arg-type]
    new = NewTopic(topic, partitions, replication_factor, config=dict(config or {}))
    created = True
    try:
        admin.create_topics([new], request_timeout=timeout)[topic].result(timeout)
    except KafkaException as exc:
        error = exc.args[0] if exc.args else None
        if not (isinstance(error, KafkaError) and error.code() == KafkaError.TOPIC_ALREADY_EXISTS):
            raise SourceError(f"creating topic {topic!r} failed: {describe(exc)}") from exc
        created = False
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = admin.list_topics(topic=topic, timeout=timeout).topics.get(topic)
        if (
            found is not None
            and found.error is None
            and len(found.partitions) >= partitions
            and all(p.leader >= 0 for p in found.partitions.values())
        ):
            return created
        time.sleep(0.05)
    raise SourceError(f"topic {topic!r} has no leader for every partition after {timeout:g} s")


def produce(
    bootstrap_servers: str,
    topic: str,
    records: Iterable[Record],
    config: Mapping[str, object] | None = None,
    timeout: float = 60.0,
) -> int:
    """Write ``records`` with an idempotent producer and wait until every one is
    acknowledged; return how many were written. Keys are partitioned with murmur2, as
    Kafka's Java clients and :class:`laneway.EmbeddedLog` do; ``config`` adds librdkafka
    producer settings (``security.protocol``, ``sasl.*``, ...)."""
    settings: dict[str, object] = {
        "bootstrap.servers": bootstrap_servers,
        "enable.idempotence": True,
        "partitioner": "murmur2_random",
        "linger.ms": 5,
        **NO_AUTO_CREATE,  # a missing topic is an error, not a new one-partition topic
        **(config or {}),
    }
    client_logging(f"kafka:{bootstrap_servers} producer", settings)
    producer = Producer(settings)
    failures: list[str] = []
    count = 0
    deadline = time.monotonic() + timeout
    for record in records:
        headers: list[tuple[str, str | bytes | None]] | None = None
        if len(record) > 2:
            headers = list(record[2])
        done = partial(_note, failures)
        while True:
            try:
                producer.produce(topic, record[1], record[0], headers=headers, on_delivery=done)
                break
            except BufferError:
                if time.monotonic() > deadline:
                    raise SourceError(f"producing to {topic!r}: the queue stayed full") from None
                producer.poll(0.05)
        count += 1
        producer.poll(0)
    left = producer.flush(max(0.0, deadline - time.monotonic()))
    if left or failures:
        raise SourceError(
            f"producing to {topic!r}: {left} records unacknowledged after {timeout:g} s, "
            f"{len(failures)} failed (first: {failures[:1]})"
        )
    return count


def _note(failures: list[str], error: KafkaError | None, _message: object) -> None:
    if error is not None:
        failures.append(describe_error(error))
