"""Inputs with offset gaps: a transactional topic (commit and abort markers, aborted records)
and a compacted one. Every committed record is handled once, in key order, on every engine,
and once the work is done the commit reaches the log end, past the markers, so the lag reads
0 as it does for Kafka's own consumer."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Producer, TopicPartition
from engines import ENGINES
from kafka_helpers import (
    committed_offsets,
    create_topic,
    end_offsets,
    produce,
    unique_name,
)
from recording import order_violations, read_calls

import laneway

pytestmark = pytest.mark.kafka

PARTITIONS = 2


def transactions(bootstrap: str, topic: str, plan: list[bool]) -> int:
    """Write one transaction of 7 keyed records per entry of ``plan`` (True: committed,
    False: aborted); the committed records' count."""
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"tx-{topic}"})
    producer.init_transactions(30)
    committed = 0
    for index, commit in enumerate(plan):
        producer.begin_transaction()
        for key in range(7):
            producer.produce(topic, b"0", b"k%d-%d" % (key, index % 3))
        producer.flush(30)
        if commit:
            producer.commit_transaction(30)
            committed += 7
        else:
            producer.abort_transaction(30)
    return committed


@pytest.fixture(scope="module")
def transactional_topic(kafka_bootstrap: str) -> Iterator[tuple[str, int]]:
    topic = unique_name("gaps-tx")
    create_topic(kafka_bootstrap, topic, PARTITIONS)
    yield topic, transactions(kafka_bootstrap, topic, [True, False, True, True, False, True, False])


@pytest.fixture(scope="module")
def compacted_topic(kafka_bootstrap: str) -> Iterator[tuple[str, int]]:
    """A compacted topic whose cleaner removed older records of each key (gaps mid-log)."""
    topic = unique_name("gaps-compacted")
    config = {
        "cleanup.policy": "compact",
        "segment.ms": "100",
        "min.cleanable.dirty.ratio": "0.001",
    }
    create_topic(kafka_bootstrap, topic, PARTITIONS, config=config)
    produce(kafka_bootstrap, topic, [(b"k%d" % (i % 10), b"0") for i in range(500)])
    deadline = time.monotonic() + 90
    while True:  # a later record rolls the segment; the cleaner looks every 15 s by default
        time.sleep(0.5)
        produce(kafka_bootstrap, topic, [(b"k%d" % i, b"0") for i in range(10)])
        present = records_present(kafka_bootstrap, topic)
        if present < sum(end_offsets(kafka_bootstrap, topic).values()):
            break
        assert time.monotonic() < deadline, "the log cleaner compacted nothing in 90 s"
    yield topic, present


def records_present(bootstrap: str, topic: str) -> int:
    """How many records the topic holds now (every partition read to its end)."""
    reader = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": unique_name("count"),
         "enable.partition.eof": True, "enable.auto.commit": False}
    )  # fmt: skip
    try:
        reader.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])
        count, at_end = 0, set()
        deadline = time.monotonic() + 30
        while len(at_end) < PARTITIONS and time.monotonic() < deadline:
            for message in reader.consume(1000, 0.5):
                error = message.error()
                if error is None:
                    count += 1
                elif error.code() == KafkaError._PARTITION_EOF:
                    at_end.add(message.partition())
        return count
    finally:
        reader.close()


def run_engine(
    bootstrap: str, topic: str, engine: str, tmp_path_factory: pytest.TempPathFactory
) -> tuple[str, laneway.ConsumerStats, list[object]]:
    import recording

    group = unique_name(f"gaps-{engine}")
    folder = tmp_path_factory.mktemp(f"calls-{engine}")
    handler = recording.handle_async if engine == "async" else recording.handle
    source = laneway.KafkaSource(bootstrap, group, [topic])
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(recording.RECORD_DIR, str(folder))
        consumer = laneway.Consumer(
            source, handler, engine=engine, handle_signals=False, commit_interval=0.2
        )
        stats = consumer.run(idle_timeout=3)
    return group, stats, read_calls(folder)


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("kind", ["transactional", "compacted"])
def test_an_input_with_gaps_is_read_once_in_key_order_and_committed_to_its_end(
    kafka_bootstrap: str, kind: str, engine: str, request: pytest.FixtureRequest,
    tmp_path_factory: pytest.TempPathFactory,
) -> None:  # fmt: skip
    topic, records = request.getfixturevalue(f"{kind}_topic")
    group, stats, calls = run_engine(kafka_bootstrap, topic, engine, tmp_path_factory)
    offsets = [(c.partition, c.offset) for c in calls]  # type: ignore[attr-defined]
    assert stats.processed == len(calls) == len(set(offsets))  # each record once
    assert order_violations(calls, "key") == []  # type: ignore[arg-type]
    ends = end_offsets(kafka_bootstrap, topic)
    if kind == "transactional":
        assert len(calls) == records  # every committed record, no aborted one
    else:  # the cleaner may remove more meanwhile, never a partition's last record
        assert {(p, end - 1) for p, end in ends.items() if end} <= set(offsets)
    committed = {p: o for p, (o, _) in committed_offsets(kafka_bootstrap, group, topic).items()}
    assert committed == ends  # lag 0, past the last marker
