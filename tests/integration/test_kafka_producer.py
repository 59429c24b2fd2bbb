"""KafkaProducer on a real broker: what it reports of failed writes, and when."""

from __future__ import annotations

import time

import pytest
from kafka_helpers import unique_name
from source_contract import until_acknowledged

import laneway.kafka
from laneway.results import Produce
from laneway.sources.kafka.producer import KafkaProducer

pytestmark = pytest.mark.kafka


def test_refused_records_are_reported_by_topic_key_and_value(kafka_bootstrap: str) -> None:
    """Records the broker refuses (too large for their topic) come back from ``poll`` with
    the error and what identifies them; the record that fits is not reported, and nothing
    counts as unacknowledged once every answer is in."""
    topic = unique_name("refused")
    laneway.kafka.create_topic(kafka_bootstrap, topic, 3, config={"max.message.bytes": "2000"})
    producer = KafkaProducer({"bootstrap.servers": kafka_bootstrap})
    sent = [
        Produce(topic, b"x" * 10_000, b"key", [("h", b"1"), ("none", None)]),
        Produce(topic, b"y" * 10_000, None, partition=2),
        Produce(topic, b"z" * 10_000, b"plain"),
        Produce(topic, b"small", b"fits"),
    ]
    assert producer.produce(sent) == []
    assert producer.unacknowledged == 4
    time.sleep(1.0)  # the broker answers; nothing is polled
    # A failure counts as unacknowledged until poll hands it back: a writer that sees 0
    # may skip polling without missing one (AcknowledgedWrites does).
    assert producer.unacknowledged >= 3
    failures = until_acknowledged(producer)
    producer.close(5.0)
    # Named as every Kafka error laneway reports: NAME (text).
    assert all(f.error.startswith("MSG_SIZE_TOO_LARGE (") for f in failures), failures
    reported = {f.value: (f.topic, f.key) for f in failures}
    assert reported == {r.value: (r.topic, r.key) for r in sent[:3]}


def test_a_full_local_queue_refuses_at_once(kafka_bootstrap: str) -> None:
    topic = unique_name("full")
    laneway.kafka.create_topic(kafka_bootstrap, topic, 1)
    producer = KafkaProducer(
        {"bootstrap.servers": kafka_bootstrap, "queue.buffering.max.messages": 1}
    )
    refused = producer.produce([Produce(topic, b"first"), Produce(topic, b"second")])
    assert [r.position for r in refused] == [1] and "BufferError" in refused[0].error
    assert until_acknowledged(producer) == []
    assert producer.produce([Produce(topic, b"second")]) == []  # room again
    assert until_acknowledged(producer) == []
    producer.close(5.0)
