"""max_buffered_bytes: what a message weighs, the bound on both logs, and Kafka's prefetch.

The bound is checked from inside the handler: every call reads ``stats().buffered_bytes``
while more than the bound is waiting in the log, so a consumer that fetched past it would
be seen doing so. A 10 KB payload and a bound of ~39 payloads make bytes, not
``max_buffered`` (10,000 messages), the limit that binds.
"""

from __future__ import annotations

import threading

import pytest
from kafka_helpers import create_topic, produce, unique_name

import laneway
from laneway.errors import ConfigError
from laneway.offsets.footprint import footprint
from laneway.sources.kafka.client_config import PREFETCH_DEFAULTS, prefetch_settings
from laneway.sources.kafka.source import KafkaSource
from laneway.types import Message

PAYLOAD = 10_000
COUNT = 300
BOUND = 400_000
"""39 messages of 10 KB (with their keys) fit, 40 do not."""


class WatchBytes:
    """A handler that records the consumer's buffered bytes at every call."""

    def __init__(self) -> None:
        self.consumer: laneway.Consumer | None = None
        self.seen: list[int] = []
        self.lock = threading.Lock()

    def __call__(self, message: Message) -> None:
        assert self.consumer is not None
        buffered = self.consumer.stats().buffered_bytes
        with self.lock:
            self.seen.append(buffered)


def run_bounded(source: laneway.sources.base.Source) -> tuple[laneway.ConsumerStats, WatchBytes]:
    handler = WatchBytes()
    consumer = laneway.Consumer(
        source, handler, engine="thread", concurrency=32, max_buffered_bytes=BOUND
    )
    handler.consumer = consumer
    stats = consumer.run(max_messages=COUNT, idle_timeout=30.0)
    return stats, handler


def records() -> list[tuple[bytes, bytes]]:
    return [(b"k%03d" % i, bytes([i % 251]) * PAYLOAD) for i in range(COUNT)]


def test_footprint_counts_values_keys_and_headers() -> None:
    messages = [
        Message("t", 0, 0, b"ab", b"12345", (("h", b"xyz"), ("n", None))),
        Message("t", 0, 1, None, None),
        Message("t", 0, 2, b"k", b"1"),
    ]
    weight = footprint(messages)
    assert weight.total == (2 + 5 + 1 + 3 + 1) + 0 + (1 + 1)
    assert weight.largest >= 2 + 5 + 1 + 3 + 1
    assert footprint([]) == (0, 0)


def test_prefetch_is_derived_from_the_budget() -> None:
    # The default budget (256 MiB / 4) changes nothing: librdkafka's own defaults.
    assert prefetch_settings(64 * 1024 * 1024, {}) == {}
    small = prefetch_settings(BOUND // 4, {})
    assert small["queued.max.messages.kbytes"] == BOUND // 4 // 1024
    assert small["fetch.max.bytes"] == 1_000_000  # librdkafka's floor, message.max.bytes
    assert small["max.partition.fetch.bytes"] == 1_000_000
    # A smaller value the user chose is kept, a larger one lowered.
    assert "queued.max.messages.kbytes" not in prefetch_settings(
        BOUND // 4, {"queued.max.messages.kbytes": 1}
    )
    assert prefetch_settings(1 << 20, {"fetch.max.bytes": 1 << 30})["fetch.max.bytes"] == 1 << 20
    assert set(small) <= set(PREFETCH_DEFAULTS)


def test_a_byte_bound_below_a_kilobyte_is_refused() -> None:
    log = laneway.EmbeddedLog()
    log.create_topic("t")
    with pytest.raises(ConfigError, match="max_buffered_bytes"):
        laneway.Consumer(log.subscribe(["t"], "g"), print, max_buffered_bytes=10)


def test_embedded_log_stays_under_the_byte_bound() -> None:
    log = laneway.EmbeddedLog()
    log.create_topic("big", partitions=4)
    log.produce_many("big", records())
    stats, handler = run_bounded(log.subscribe(["big"], "g"))
    assert stats.processed == COUNT
    assert max(handler.seen) <= BOUND
    assert max(handler.seen) > BOUND // 2  # it did fill up to the bound, not far below it
    assert stats.buffered_bytes == 0


@pytest.mark.kafka
def test_kafka_stays_under_the_byte_bound_and_bounds_its_prefetch(kafka_bootstrap: str) -> None:
    topic = unique_name("bytes")
    create_topic(kafka_bootstrap, topic, 4)
    produce(kafka_bootstrap, topic, records())
    source = KafkaSource(
        kafka_bootstrap,
        unique_name("bytes-group"),
        [topic],
        {"session.timeout.ms": 6000, "heartbeat.interval.ms": 500},
    )
    stats, handler = run_bounded(source)
    assert stats.processed == COUNT
    assert max(handler.seen) <= BOUND
    assert max(handler.seen) > BOUND // 2
    prefetch = source.client_config
    assert prefetch["queued.max.messages.kbytes"] == BOUND // 4 // 1024
    assert prefetch["fetch.max.bytes"] == 1_000_000
