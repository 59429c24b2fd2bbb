"""Malformed input records: each case has one defined outcome, on both sources.

* ``None`` keys and values reach the handler (and dead letters) as ``None``; in
  ``ordering="key"`` all ``None``-key messages of a partition form one lane.
* 10 MB values are delivered intact (Kafka: the topic's ``max.message.bytes`` and the
  producer's ``message.max.bytes`` raised; consumer defaults suffice; the durable
  embedded log reads them back from disk).
* Header values are delivered and copied into dead letters byte for byte: ``None``,
  empty, non-UTF-8, repeated names, a non-ASCII name, order.

Handlers are module-level so process-engine workers can import them by name.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import cast

import kafka_helpers
import pytest
import recording
from chaos_harness import run_bounded
from confluent_kafka import Producer
from confluent_kafka.cimpl import NewTopic
from topics import SOURCES, EmbeddedTopic, KafkaTopic, LogTopic

import laneway
from laneway.sources.base import Source
from laneway.types import Header, Message

GROUP = kafka_helpers.unique_name("malformed")
"""One group name per test session: never shared with other users of the broker."""
Produced = tuple[bytes | None, bytes | None, Sequence[Header]]


# -- handlers (importable by worker processes) -----------------------------------------


def check_digest(message: Message) -> None:
    """Fails unless the value's sha256 matches its ``sha256`` header."""
    expected = dict(message.headers)["sha256"]
    if hashlib.sha256(message.value or b"").hexdigest().encode() != expected:
        raise ValueError(f"value of {len(message.value or b'')} bytes changed")


ODD_HEADERS: list[Header] = [
    ("bin", b"\xff\xfe"),
    ("none", None),
    ("empty", b""),
    ("dup", b"1"),
    ("dup", b"2"),
    ("naïve-名", b"utf-8 name"),
]


def check_headers(message: Message) -> None:
    """Fails if the headers changed; fails on purpose for ``b"fail"`` (dead-letter me)."""
    if list(message.headers) != ODD_HEADERS:
        raise AssertionError(f"headers changed: {message.headers!r}")
    if message.value == b"fail":
        raise ValueError("dead-letter me")


# -- helpers ---------------------------------------------------------------------------


@pytest.fixture
def record_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv(recording.RECORD_DIR, str(tmp_path))
    return tmp_path


def produce(topic: LogTopic, records: list[Produced]) -> list[tuple[int, int]]:
    """Write records with headers to either kind of topic; their (partition, offset)."""
    if isinstance(topic, EmbeddedTopic):
        return [topic.log.produce(topic.name, v, k, headers=h) for k, v, h in records]
    assert isinstance(topic, KafkaTopic)
    # kafka_helpers types header values as bytes; it passes None (a null header) through.
    rows = [cast(kafka_helpers.Record, (k, v, list(h))) for k, v, h in records]
    return kafka_helpers.produce(topic.bootstrap, topic.name, rows)


def committed_all(topic: LogTopic, group: str) -> bool:
    return {p: o for p, (o, _) in topic.committed(group).items()} == topic.end_offsets()


# -- None keys and values --------------------------------------------------------------


@pytest.mark.parametrize("source_kind", SOURCES)
def test_none_keys_and_values_arrive_as_none_in_one_lane_per_partition(
    source_kind: str, make_topic: Callable[[str, int], LogTopic], record_dir: Path
) -> None:
    partitions = 4
    topic = make_topic(source_kind, partitions)
    records: list[Produced] = [(None, b"1", ())] * 120 + [(b"k", None, ())] * 20
    records += [(None, None, ())] * 20 + [(f"key-{i}".encode(), b"0", ()) for i in range(40)]
    random.Random(3).shuffle(records)
    placed = produce(topic, records)
    keyless_partitions = {p for (p, _), (k, _, _) in zip(placed, records, strict=True) if k is None}
    assert len(keyless_partitions) >= 2, "setup: every keyless record landed in one partition"
    seen: dict[tuple[int, int], tuple[bytes | None, bytes | None]] = {}

    def handle(message: Message) -> None:
        seen[(message.partition, message.offset)] = (message.key, message.value)
        recording.handle(message)

    consumer = laneway.Consumer(
        topic.source(GROUP), handle, engine="thread", concurrency=8, handle_signals=False
    )
    stats = run_bounded(consumer, len(records))
    assert stats.processed == len(records)
    assert seen == {where: (k, v) for where, (k, v, _) in zip(placed, records, strict=True)}
    calls = recording.read_calls(record_dir)
    assert recording.order_violations(calls, "key") == []
    keyless = [c for c in calls if c.key == "-"]
    assert 2 <= recording.peak_concurrency(keyless) <= partitions, "not one lane per partition"
    assert committed_all(topic, GROUP)


@pytest.mark.parametrize("source_kind", SOURCES)
def test_none_keys_and_values_are_dead_lettered_as_none(
    source_kind: str, make_topic: Callable[[str, int], LogTopic]
) -> None:
    topic = make_topic(source_kind, 1)
    records: list[Produced] = [(None, None, ()), (b"k", None, ()), (None, b"fine", ())]
    produce(topic, records)

    def handle(message: Message) -> None:
        if message.value is None:
            raise ValueError("no value")

    consumer = laneway.Consumer(topic.source(GROUP), handle, max_retries=0, handle_signals=False)
    stats = run_bounded(consumer, 3)
    assert (stats.processed, stats.failed, stats.dead_lettered) == (1, 2, 2)
    letters = topic.read(f"{topic.name}.dlq", 2)
    assert sorted((k or b"", v) for k, v, _ in letters) == [(b"", None), (b"k", None)]
    assert committed_all(topic, GROUP)


# -- 10 MB values ----------------------------------------------------------------------

BIG = 10 * 1024 * 1024


def big_records(count: int) -> list[Produced]:
    rng = random.Random(5)
    values = [rng.randbytes(BIG) for _ in range(count)]
    return [
        (b"big-%d" % i, v, [("sha256", hashlib.sha256(v).hexdigest().encode())])
        for i, v in enumerate(values)
    ]


def produce_big_to_kafka(bootstrap: str, records: list[Produced]) -> str:
    """A topic that takes 16 MB records, written by a producer allowed to send them."""
    limit = str(16 * 1024 * 1024)
    name = kafka_helpers.unique_name("big")
    admin = kafka_helpers.admin_client(bootstrap)
    config = {"max.message.bytes": limit}
    topic = NewTopic(name, num_partitions=1, replication_factor=1, config=config)
    admin.create_topics([topic])[name].result(timeout=30)
    producer = Producer({"bootstrap.servers": bootstrap, "message.max.bytes": limit})
    errors: list[object] = []
    for key, value, headers in records:
        producer.produce(
            name, value, key, headers=list(headers), on_delivery=lambda e, _: errors.append(e)
        )
        producer.poll(0)
    assert producer.flush(60) == 0 and errors == [None] * len(records), errors
    return name


@pytest.mark.parametrize(
    ("where", "engine"),
    [
        ("memory", "thread"),
        ("memory", "process"),
        ("durable", "thread"),
        pytest.param("kafka", "thread", marks=pytest.mark.kafka),
    ],
)
def test_ten_megabyte_values_arrive_intact(
    where: str, engine: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    records = big_records(3)
    source: Source
    if where == "kafka":
        bootstrap = request.getfixturevalue("kafka_bootstrap")
        name = produce_big_to_kafka(bootstrap, records)
        source = laneway.KafkaSource(bootstrap_servers=bootstrap, group=GROUP, topics=[name])
    else:
        path = tmp_path / "log" if where == "durable" else None
        log = laneway.EmbeddedLog(path=path)
        log.create_topic("big", partitions=1)
        for key, value, headers in records:
            log.produce("big", value, key, headers=headers)
        if path is not None:  # read back from disk, not from the writer's memory
            log.close()
            log = laneway.EmbeddedLog(path=path)
        source = log.subscribe(["big"], group=GROUP)
    consumer = laneway.Consumer(
        source, check_digest, engine=engine, concurrency=2, max_retries=0, handle_signals=False
    )
    stats = run_bounded(consumer, 3)
    assert (stats.processed, stats.failed) == (3, 0), "a value changed on its way"


def refuse_big(message: Message) -> None:
    if len(message.value or b"") > 1024 * 1024:
        raise ValueError("too big to handle")


@pytest.mark.parametrize("source_kind", SOURCES)
def test_a_failing_ten_megabyte_message_is_dead_lettered_intact(
    source_kind: str, request: pytest.FixtureRequest
) -> None:
    [big] = big_records(1)
    records: list[Produced] = [big, (b"small", b"fine", ())]
    if source_kind == "kafka":
        bootstrap = request.getfixturevalue("kafka_bootstrap")
        name = produce_big_to_kafka(bootstrap, records)
        source: Source = laneway.KafkaSource(
            bootstrap_servers=bootstrap, group=GROUP, topics=[name]
        )
    else:
        topic = EmbeddedTopic(partitions=1)
        name = topic.name
        produce(topic, records)
        source = topic.source(GROUP)
    consumer = laneway.Consumer(
        source, refuse_big, max_retries=0, drain_timeout=1.0, handle_signals=False
    )
    stats = run_bounded(consumer, 2)
    assert (stats.processed, stats.failed, stats.dead_lettered) == (1, 1, 1)
    if source_kind == "kafka":
        [letter] = kafka_helpers.read_records(bootstrap, f"{name}.dlq", 1)
        key, value = letter.key, letter.value
    else:
        [(key, value, _)] = topic.read(f"{name}.dlq", 1)
    assert (key, value) == (big[0], big[1]), "the dead letter is not the message"


# -- headers ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("source_kind", "engine"),
    [
        ("embedded", "thread"),
        ("embedded", "process"),
        pytest.param("kafka", "thread", marks=pytest.mark.kafka),
    ],
)
def test_odd_headers_reach_the_handler_and_dead_letters_unchanged(
    source_kind: str, engine: str, make_topic: Callable[[str, int], LogTopic]
) -> None:
    topic = make_topic(source_kind, 1)
    produce(topic, [(b"k", b"ok", ODD_HEADERS), (b"k", b"fail", ODD_HEADERS)])
    consumer = laneway.Consumer(
        topic.source(GROUP),
        check_headers,
        engine=engine,
        concurrency=1,
        max_retries=0,
        handle_signals=False,
    )
    stats = run_bounded(consumer, 2)
    assert (stats.processed, stats.failed, stats.dead_lettered) == (1, 1, 1)
    [(_, value, headers)] = topic.read(f"{topic.name}.dlq", 1)
    assert value == b"fail"
    assert headers[: len(ODD_HEADERS)] == ODD_HEADERS
    assert dict(headers[len(ODD_HEADERS) :])["laneway.error.type"] == b"ValueError"
    assert committed_all(topic, GROUP)
