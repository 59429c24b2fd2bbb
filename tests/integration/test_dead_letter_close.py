"""A dead letter counts only once its write is acknowledged, at shutdown too.

The dead-letter topic here refuses the record (its ``max.message.bytes`` is smaller than
the record), so every write fails. At shutdown the router closes its producer, which
serves the last delivery reports itself; before, a failure reported there went unseen and
the round counted as written: the ERROR said "dead-lettered to X", ``dead_lettered``
counted it, and the revocation on close committed its offset — the message was in neither
the dead-letter topic nor the replay.
"""

from __future__ import annotations

import logging
import time

import pytest
from confluent_kafka.admin import AdminClient, NewTopic
from kafka_helpers import create_topic, end_offsets, unique_name

import laneway
from laneway.config import ConsumerConfig
from laneway.control.dead_letters.router import DeadLetterRouter
from laneway.types import Failure, Message

pytestmark = pytest.mark.kafka


def refusing_topic(bootstrap: str, name: str) -> None:
    """A topic that refuses records larger than 200 bytes."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    new = NewTopic(name, 1, config={"max.message.bytes": "200"})
    admin.create_topics([new])[name].result(30)
    deadline = time.monotonic() + 30
    while name not in admin.list_topics(timeout=10).topics and time.monotonic() < deadline:
        time.sleep(0.1)


def test_a_dead_letter_refused_at_shutdown_is_neither_reported_nor_settled(
    kafka_bootstrap: str, caplog: pytest.LogCaptureFixture
) -> None:
    topic = unique_name("dlq-close")
    create_topic(kafka_bootstrap, topic, 1)
    refusing_topic(kafka_bootstrap, f"{topic}.dlq")
    source = laneway.KafkaSource(kafka_bootstrap, unique_name("dlq-close-group"), [topic])
    config = ConsumerConfig.from_options({"retry_backoff": 0.001, "retry_backoff_max": 0.002})
    router = DeadLetterRouter(source, config)
    message = Message(topic, 0, 0, b"k", b"x" * 500)
    try:
        router.route([Failure(message, "ValueError", "refused", 1)])
        assert router.poll() == []  # the write goes out
        time.sleep(0.5)  # its failure comes back and waits in the producer, unserved
        with caplog.at_level(logging.DEBUG, logger="laneway"):
            router.close(1.0)
            assert router.poll() == [], "nothing is settled once closed"
    finally:
        source.close()
    said = [r.getMessage() for r in caplog.records if "dead-lettered to" in r.getMessage()]
    assert said == [], "the write never succeeded"
    assert router.dead_lettered == 0
    assert router.write_errors >= 1, "the failures were seen"
    assert end_offsets(kafka_bootstrap, f"{topic}.dlq") == {0: 0}
