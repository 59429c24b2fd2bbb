"""Small helpers for tests that talk to the real Kafka broker of the `kafka_bootstrap` fixture.

The broker does not auto-create topics, so a test creates each topic it uses with
`create_topic` (named with `unique_name`, so tests never share state). Every wait is bounded.
"""

from __future__ import annotations

import subprocess
import sys
import time
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    ConsumerGroupTopicPartitions,
    KafkaError,
    KafkaException,
    Message,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import (  # type: ignore[attr-defined]
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ResourceType,
)
from confluent_kafka.cimpl import NewTopic

import laneway

KeyOrValue = bytes | str | None
Headers = list[tuple[str, bytes | None]]
Record = tuple[KeyOrValue, KeyOrValue] | tuple[KeyOrValue, KeyOrValue, Headers]

KAFKA_SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "kafka"
REQUEST_TIMEOUT_S = 30.0
POLL_INTERVAL_S = 0.1


@dataclass(frozen=True)
class ReadRecord:
    """One record read back from a topic, as plain values a test can compare."""

    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]]
    timestamp_ms: int
    """The record's timestamp (CreateTime: what its producer set), Unix milliseconds."""


def run_kafka_script(
    command: str, timeout_s: float, script: Path = KAFKA_SCRIPT, arguments: Iterable[str] = ()
) -> subprocess.CompletedProcess[str]:
    """Run `scripts/kafka <command> [arguments]` (or a copy of it, or another service script
    such as `scripts/postgres`) with this interpreter, capturing output."""
    return subprocess.run(
        [sys.executable, str(script), command, *arguments],
        capture_output=True,
        text=True,
        timeout=timeout_s,
        check=False,
    )


FAST_SHARE_JOIN = {"share.heartbeat.interval.ms": "500"}
"""Share group configs under which members join in about a second (the broker's default
heartbeat interval is 5 s)."""


def share_source(
    bootstrap: str,
    group: str,
    topics: list[str],
    config: dict[str, object] | None = None,
    **options: object,
) -> laneway.KafkaShareSource:
    """A share group source for tests: joining fast (``FAST_SHARE_JOIN``) and without a
    crash journal, unless ``options`` say otherwise."""
    options.setdefault("group_config", FAST_SHARE_JOIN)
    options.setdefault("crash_journal", False)
    return laneway.KafkaShareSource(bootstrap, group, topics, config, **options)  # type: ignore[arg-type]


def unique_name(prefix: str) -> str:
    """A topic or group name no other test (or earlier run against the same broker) uses."""
    return f"{prefix}-{uuid.uuid4().hex[:12]}"


def admin_client(bootstrap: str) -> AdminClient:
    return AdminClient({"bootstrap.servers": bootstrap})


def partition_ids(bootstrap: str, topic: str) -> list[int]:
    """The partition numbers of an existing topic, in order."""
    metadata = admin_client(bootstrap).list_topics(topic=topic, timeout=REQUEST_TIMEOUT_S)
    described = metadata.topics.get(topic)
    if described is None or described.error is not None:
        raise LookupError(f"topic {topic!r} is not known to the broker: {described}")
    return sorted(described.partitions)


def create_topic(
    bootstrap: str,
    name: str,
    partitions: int,
    timeout_s: float = 30.0,
    config: dict[str, str] | None = None,
) -> None:
    """Create a topic (replication factor 1, the topic ``config`` given) and wait until every
    partition's leader serves it.

    Metadata can name a leader a moment before that broker answers for the partition, so this
    waits until a log-end-offset query succeeds on every partition.
    """
    admin = admin_client(bootstrap)
    topic = NewTopic(name, num_partitions=partitions, replication_factor=1, config=config or {})
    futures = admin.create_topics([topic])
    futures[name].result(timeout=timeout_s)
    pending = set(range(partitions))
    last_error: KafkaException | None = None
    deadline = time.monotonic() + timeout_s
    consumer = _offsets_consumer(bootstrap)
    try:
        for _ in range(int(timeout_s / POLL_INTERVAL_S) + 1):
            for partition in sorted(pending):
                try:
                    consumer.get_watermark_offsets(TopicPartition(name, partition), timeout=1.0)
                    pending.discard(partition)
                except KafkaException as error:
                    last_error = error
            if not pending or time.monotonic() > deadline:
                break
            time.sleep(POLL_INTERVAL_S)
    finally:
        consumer.close()
    if pending:
        raise TimeoutError(f"{name!r} partitions {sorted(pending)} not served: {last_error}")


KAFKA_LIBS = KAFKA_SCRIPT.parents[1] / ".kafka" / "libs"
TOPIC_COMMAND = "org.apache.kafka.tools.TopicCommand"
"""kafka-topics.sh, from the kafka-tools jar that scripts/kafka fetches."""


def delete_topic(bootstrap: str, name: str, timeout_s: float = 60.0) -> None:
    """Delete a topic with Kafka's own kafka-topics (``TopicCommand --delete``), as an
    operator would, and wait until the broker no longer lists it."""
    command = [
        "java", "-cp", f"{KAFKA_LIBS}/*", "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
        TOPIC_COMMAND, "--bootstrap-server", bootstrap, "--delete", "--topic", name,
    ]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=timeout_s, check=False)
    assert done.returncode == 0, f"kafka-topics --delete failed:\n{done.stdout}\n{done.stderr}"
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        metadata = admin_client(bootstrap).list_topics(timeout=REQUEST_TIMEOUT_S)
        if name not in metadata.topics:
            return
        time.sleep(POLL_INTERVAL_S)
    raise TimeoutError(f"{name!r} still listed {timeout_s:g} s after its deletion")


def _offsets_consumer(bootstrap: str) -> Consumer:
    """A consumer that only queries offsets: it never joins its (unique) group."""
    return Consumer({"bootstrap.servers": bootstrap, "group.id": unique_name("offsets")})


def end_offsets(bootstrap: str, topic: str) -> dict[int, int]:
    """The log-end offset (high watermark) of every partition of `topic`."""
    consumer = _offsets_consumer(bootstrap)
    try:
        return {
            p: consumer.get_watermark_offsets(TopicPartition(topic, p), REQUEST_TIMEOUT_S)[1]
            for p in partition_ids(bootstrap, topic)
        }
    finally:
        consumer.close()


def committed_offsets(bootstrap: str, group: str, topic: str) -> dict[int, tuple[int, str]]:
    """The (offset, metadata) the broker holds for `group` on each partition of `topic`.

    Partitions the group never committed are absent; metadata committed as None reads back "".
    """
    admin = admin_client(bootstrap)  # must outlive the future, or the request is abandoned
    request = ConsumerGroupTopicPartitions(group)
    futures = admin.list_consumer_group_offsets([request], request_timeout=REQUEST_TIMEOUT_S)
    answer: ConsumerGroupTopicPartitions = futures[group].result(timeout=REQUEST_TIMEOUT_S)
    return {
        tp.partition: (tp.offset, tp.metadata or "")
        for tp in answer.topic_partitions or []
        if tp.topic == topic and tp.offset >= 0
    }


def _record_delivery(
    results: list[tuple[int, int] | None],
    failures: list[str],
    index: int,
    error: KafkaError | None,
    message: Message,
) -> None:
    partition, offset = message.partition(), message.offset()
    if error is not None or partition is None or offset is None:
        failures.append(f"record {index}: {error}")
    else:
        results[index] = (partition, offset)


def produce(
    bootstrap: str,
    topic: str,
    records: Iterable[Record],
    timeout_s: float = 60.0,
    settings: dict[str, object] | None = None,
) -> list[tuple[int, int]]:
    """Write records with an idempotent producer; return each one's (partition, offset).

    Keys are partitioned with murmur2 (`murmur2_random`), as the Java client and laneway's
    EmbeddedLog do. ``settings`` adds producer settings (e.g. ``batch.num.messages``: a
    share group hands out whole record batches). Raises RuntimeError unless every record
    was acknowledged by the broker.
    """
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "enable.idempotence": True,
            "partitioner": "murmur2_random",
            # Null keys: a random partition per record, not one partition per 10 ms batch
            # (librdkafka's sticky default), so tests see keyless records spread out.
            "sticky.partitioning.linger.ms": 0,
            "linger.ms": 5,
            **(settings or {}),
        }
    )
    results: list[tuple[int, int] | None] = []
    failures: list[str] = []
    deadline = time.monotonic() + timeout_s
    for index, record in enumerate(records):
        key, value = record[0], record[1]
        headers: list[tuple[str, str | bytes | None]] | None = None
        if len(record) == 3:
            headers = [(name, header) for name, header in record[2]]
        results.append(None)
        on_delivery = partial(_record_delivery, results, failures, index)
        while True:
            try:
                producer.produce(topic, value, key, headers=headers, on_delivery=on_delivery)
                break
            except BufferError:
                if time.monotonic() > deadline:
                    raise TimeoutError("producer queue stayed full") from None
                producer.poll(POLL_INTERVAL_S)
        producer.poll(0)
    remaining = producer.flush(max(0.0, deadline - time.monotonic()))
    if remaining or failures:
        raise RuntimeError(f"{remaining} records undelivered; failures: {failures[:5]}")
    delivered = [result for result in results if result is not None]
    if len(delivered) != len(results):
        raise RuntimeError("a delivery report is missing")
    return delivered


def read_records(
    bootstrap: str, topic: str, count: int, timeout_s: float = 30.0
) -> list[ReadRecord]:
    """Read every partition of `topic` from the beginning until `count` records arrived.

    Uses a throw-away group and commits nothing. Raises TimeoutError with fewer records.
    """
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": unique_name("read-records"),
            "enable.auto.commit": False,
            "enable.partition.eof": False,
        }
    )
    try:
        consumer.assign(
            [TopicPartition(topic, p, OFFSET_BEGINNING) for p in partition_ids(bootstrap, topic)]
        )
        read: list[ReadRecord] = []
        deadline = time.monotonic() + timeout_s
        for _ in range(int(timeout_s / 0.5) + 1):
            if len(read) >= count or time.monotonic() > deadline:
                break
            for message in consumer.consume(num_messages=count - len(read), timeout=0.5):
                error = message.error()
                if error is not None:
                    raise RuntimeError(f"consume error: {error}")
                read.append(_as_record(message))
    finally:
        consumer.close()
    if len(read) < count:
        raise TimeoutError(f"read {len(read)} of {count} records from {topic!r}")
    return read


def _as_record(message: Message) -> ReadRecord:
    partition, offset = message.partition(), message.offset()
    if partition is None or offset is None:
        raise RuntimeError("consumed message without partition or offset")
    headers = message.headers() or []
    pairs = list(headers.items()) if isinstance(headers, dict) else list(headers)
    return ReadRecord(
        partition=partition,
        offset=offset,
        key=message.key(),
        value=message.value(),
        headers=[
            (name, value.encode() if isinstance(value, str) else value) for name, value in pairs
        ],
        timestamp_ms=message.timestamp()[1],
    )


def committed_to_end(bootstrap: str, group: str, topic: str, total: int) -> bool:
    """Whether ``topic`` holds ``total`` records and ``group`` committed all of them."""
    ends = end_offsets(bootstrap, topic)
    committed = committed_offsets(bootstrap, group, topic)
    return sum(ends.values()) == total and {p: o for p, (o, _) in committed.items()} == ends


def share_group_config(bootstrap: str, group: str) -> dict[str, str]:
    """The group configs of share group ``group`` (Kafka's defaults where none is set)."""
    resource = ConfigResource(ResourceType.GROUP, group)
    admin = admin_client(bootstrap)  # kept alive until the answer is in
    found = admin.describe_configs([resource])[resource].result(REQUEST_TIMEOUT_S)
    return {name: entry.value for name, entry in found.items()}


def set_share_group_config(bootstrap: str, group: str, configs: dict[str, str]) -> None:
    """Set share group configs of ``group`` (as an operator would with kafka-configs)."""
    entries = [
        ConfigEntry(name, value, incremental_operation=AlterConfigOpType.SET)
        for name, value in configs.items()
    ]
    resource = ConfigResource(ResourceType.GROUP, group, incremental_configs=entries)
    admin = admin_client(bootstrap)  # kept alive until the answer is in
    admin.incremental_alter_configs([resource])[resource].result(REQUEST_TIMEOUT_S)


def plain_figures(bootstrap: str, group: str, topic: str) -> dict[int, tuple[int | None, int]]:
    """(committed offset or None, high watermark) per partition of ``topic``, read the way a
    plain client (and kafka-consumer-groups.sh) reads them: OffsetFetch for ``group``,
    ListOffsets."""
    client = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        parts = [TopicPartition(topic, p) for p in partition_ids(bootstrap, topic)]
        committed = {tp.partition: tp.offset for tp in client.committed(parts, timeout=30)}
        return {
            tp.partition: (
                committed[tp.partition] if committed[tp.partition] >= 0 else None,
                client.get_watermark_offsets(tp, timeout=30)[1],
            )
            for tp in parts
        }
    finally:
        client.close()
