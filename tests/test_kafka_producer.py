"""KafkaProducer on a real broker: what a failed delivery hands back to write again."""

from __future__ import annotations

import time

import pytest
from kafka_helpers import unique_name

import laneway.kafka
from laneway.results import Produce
from laneway.sources.kafka_producer import KafkaProducer

pytestmark = pytest.mark.kafka


def test_a_refused_record_comes_back_whole_for_the_next_write(kafka_bootstrap: str) -> None:
    """The delivery report of a record the broker refuses (too large for its topic) is
    turned back into the same record: topic, value, key, headers, and the partition the
    client had put it in (the one its key picks), so writing it again writes what the
    handler returned."""
    topic = unique_name("refused")
    laneway.kafka.create_topic(kafka_bootstrap, topic, 3, config={"max.message.bytes": "2000"})
    producer = KafkaProducer({"bootstrap.servers": kafka_bootstrap})
    reports: list[tuple[object, object]] = []
    sent = [
        Produce(topic, b"x" * 10_000, b"key", [("h", b"1"), ("none", None)]),
        Produce(topic, b"y" * 10_000, None, partition=2),
        Produce(topic, b"z" * 10_000, b"plain"),
        Produce(topic, b"small", b"fits"),
    ]
    for record in sent:
        producer.produce(record, lambda error, written: reports.append((error, written)))
    deadline = time.monotonic() + 30
    while len(reports) < len(sent) and time.monotonic() < deadline:
        producer.poll()
        time.sleep(0.01)
    producer.close(5.0)
    assert len(reports) == 4
    failed = [producer.failure(error, written) for error, written in reports if error is not None]
    assert len(failed) == 3, "the record that fits is acknowledged"
    texts = [text for text, _ in failed]
    assert all("MSG_SIZE_TOO_LARGE" in text for text in texts), texts
    again = sorted((r for _, r in failed), key=lambda r: r.value or b"")
    with_headers, placed, plain = again
    assert with_headers == sent[0]
    assert placed == sent[1]
    assert plain[:4] == sent[2][:4]  # and the partition its key picked
    assert plain.partition is None or 0 <= plain.partition < 3
