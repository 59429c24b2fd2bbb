"""Chaos: one poison message (its handler always raises) among healthy ones, on Kafka.

The poison message is retried, then copied to ``<topic>.dlq`` with its own headers and
laneway's failure headers; every healthy message (its key's later ones included) is
handled exactly once and in lane order, and the committed offsets reach the log end.
"""

from __future__ import annotations

import random
from pathlib import Path

import kafka_helpers
import pytest
import recording

import laneway

MESSAGES = 3_000
KEYS = 50
PARTITIONS = 4
POISON_AT = 1_234
POISON_KEY = b"key-7"
RETRIES = 2


@pytest.fixture
def record_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv(recording.RECORD_DIR, str(tmp_path))
    return tmp_path


@pytest.mark.kafka
@pytest.mark.parametrize("engine", ["thread", "async", "process"])
def test_a_poison_message_is_dead_lettered_and_the_rest_flows(
    engine: str, kafka_bootstrap: str, record_dir: Path
) -> None:
    rng = random.Random(11)
    topic = kafka_helpers.unique_name("chaos-poison")
    group = kafka_helpers.unique_name("chaos-poison-group")
    kafka_helpers.create_topic(kafka_bootstrap, topic, PARTITIONS)
    records: list[kafka_helpers.Record] = [
        (f"key-{rng.randrange(KEYS)}".encode(), b"0.1", [("n", str(i).encode())])
        for i in range(MESSAGES)
    ]
    records[POISON_AT] = (POISON_KEY, b"fail", [("trace", b"\xff\x00poison"), ("n", b"x")])
    placed = kafka_helpers.produce(kafka_bootstrap, topic, records)
    poison_partition, poison_offset = placed[POISON_AT]

    consumer = laneway.Consumer(
        laneway.KafkaSource(bootstrap_servers=kafka_bootstrap, group=group, topics=[topic]),
        recording.handle_async if engine == "async" else recording.handle,
        engine=engine,
        ordering="key",
        concurrency=2 if engine == "process" else 16,
        max_retries=RETRIES,
        retry_backoff=0.01,
        handle_signals=False,
    )
    stats = consumer.run(max_messages=MESSAGES, idle_timeout=60)

    assert (stats.processed, stats.failed, stats.dead_lettered) == (MESSAGES - 1, 1, 1)
    calls = recording.read_calls(record_dir)
    handled = {(c.partition, c.offset) for c in calls}
    healthy = set(placed) - {(poison_partition, poison_offset)}
    assert handled == healthy, "a healthy message was lost or the poison one succeeded"
    assert recording.duplicates(calls) == 0
    assert recording.order_violations(calls, "key") == []
    later_same_key = [
        c for c in calls if c.key == POISON_KEY.hex() and c.partition == poison_partition
    ]
    assert any(c.offset > poison_offset for c in later_same_key), "the poison key's lane stalled"

    [(key, value, headers)] = [
        (r.key, r.value, r.headers)
        for r in kafka_helpers.read_records(kafka_bootstrap, f"{topic}.dlq", 1)
    ]
    assert (key, value) == (POISON_KEY, b"fail")
    assert headers[:2] == [("trace", b"\xff\x00poison"), ("n", b"x")], "original headers changed"
    named = dict(headers[2:])
    assert named["laneway.error.type"] == b"ValueError"
    assert named["laneway.error.message"] == f"refused offset {poison_offset}".encode()
    assert named["laneway.attempts"] == str(RETRIES + 1).encode()
    assert named["laneway.original.topic"] == topic.encode()
    assert named["laneway.original.partition"] == str(poison_partition).encode()
    assert named["laneway.original.offset"] == str(poison_offset).encode()
    committed = kafka_helpers.committed_offsets(kafka_bootstrap, group, topic)
    assert {p: o for p, (o, _) in committed.items()} == kafka_helpers.end_offsets(
        kafka_bootstrap, topic
    )
