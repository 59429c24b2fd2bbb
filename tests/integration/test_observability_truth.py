"""Observability that never lies: clock skew does not make latency negative, and the dead
letter of a message that carried no trace context continues the trace its attempts ran in."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import kafka_helpers
import process_handlers
import pytest
import tracing_support
from confluent_kafka import Producer
from metrics_scrape import scrape
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from topics import SOURCES, EmbeddedTopic, KafkaTopic, LogTopic

import laneway
from laneway.observability.prometheus import PrometheusMetrics

AHEAD_MS = 3_600_000
"""How far in the future the skewed producer's clock runs: an hour."""


def produce_at(topic: LogTopic, stamps_ms: list[int]) -> None:
    """One record per timestamp, with that CreateTime."""
    if isinstance(topic, EmbeddedTopic):
        for index, stamp in enumerate(stamps_ms):
            topic.log.produce(topic.name, b"v", b"k%d" % index, timestamp=stamp)
        return
    assert isinstance(topic, KafkaTopic)
    producer = Producer({"bootstrap.servers": topic.bootstrap, "enable.idempotence": True})
    for index, stamp in enumerate(stamps_ms):
        producer.produce(topic.name, b"v", b"k%d" % index, timestamp=stamp)
    assert producer.flush(30) == 0


@pytest.mark.parametrize("source_kind", SOURCES)
def test_a_timestamp_ahead_of_the_clock_counts_as_skew_and_zero_latency(
    source_kind: str, make_topic: Callable[[str, int], LogTopic]
) -> None:
    topic = make_topic(source_kind, 1)
    now_ms = int(time.time() * 1000)
    stamps = [now_ms - 50] * 10 + [now_ms + AHEAD_MS] * 5
    produce_at(topic, stamps)
    metrics = PrometheusMetrics()
    port = metrics.serve(0, "127.0.0.1")
    stats = laneway.Consumer(
        topic.source("skewed"), lambda m: None, metrics=metrics, handle_signals=False
    ).run(max_messages=15, idle_timeout=30)
    assert stats.processed == 15
    after = scrape(port)
    labels = (("topic", topic.name),)
    assert after["laneway_end_to_end_latency_seconds_count"][labels] == 15
    total = after["laneway_end_to_end_latency_seconds_sum"][labels]
    assert 0 <= total < 15 * 60, f"the sum of latencies is {total}"
    first_bucket = (("le", "0.0001"), *labels)
    assert after["laneway_end_to_end_latency_seconds_bucket"][first_bucket] >= 5
    assert after["laneway_clock_skew_total"][labels] == 5


def untraced_run(topic: LogTopic, engine: str) -> None:
    """``ok``, ``bad`` and ``ok`` without any header; ``bad`` fails 1 + 2 retries."""
    topic.produce([(b"k0", b"ok"), (b"k1", b"bad"), (b"k2", b"ok")])
    laneway.Consumer(
        topic.source("untraced"),
        process_handlers.fail_bad_amounts,
        engine=engine,
        concurrency=1,
        max_retries=2,
        retry_backoff=0.001,
        handle_signals=False,
    ).run(max_messages=3, idle_timeout=30)


@pytest.mark.parametrize("source_kind", SOURCES)
@pytest.mark.parametrize("engine", ["thread", "process"])
def test_an_untraced_message_s_attempts_and_dead_letter_are_one_trace(
    engine: str,
    source_kind: str,
    make_topic: Callable[[str, int], LogTopic],
    spans: tuple[InMemorySpanExporter, Path],
) -> None:
    exporter, worker_file = spans
    topic = make_topic(source_kind, 1)
    untraced_run(topic, engine)
    local = [tracing_support.span_record(span) for span in exporter.get_finished_spans()]
    everything = local + tracing_support.read_spans(worker_file)
    attempts = [s for s in everything if s["name"] == f"process {topic.name}"]
    by_offset: dict[int, list[dict[str, Any]]] = {}
    for span in attempts:
        by_offset.setdefault(span["attributes"]["messaging.kafka.offset"], []).append(span)
    assert sorted(len(spans) for spans in by_offset.values()) == [1, 1, 3]
    failing = by_offset[1]
    assert [s["status"] for s in failing] == ["ERROR"] * 3
    assert len({s["trace_id"] for s in failing}) == 1, "every attempt of a message: one trace"
    assert len({s["parent_id"] for s in failing}) == 1
    traces = {offset: runs[0]["trace_id"] for offset, runs in by_offset.items()}
    assert len(set(traces.values())) == 3, "each message its own trace"

    [(_, _, headers)] = topic.read(f"{topic.name}.dlq", 1)
    _, trace_id, parent_id, flags = dict(headers)["traceparent"].decode().split("-")
    assert trace_id == traces[1], "the dead letter continues its attempts' trace"
    assert flags == "01"
    send = next(s for s in local if s["name"] == f"send {topic.name}.dlq")
    assert send["span_id"] == parent_id and send["trace_id"] == trace_id
    assert send["parent_id"] == failing[0]["parent_id"], "a sibling of the attempts"


def test_a_failed_batch_call_links_to_the_trace_its_untraced_dead_letter_joins(
    spans: tuple[InMemorySpanExporter, Path],
) -> None:
    exporter, _ = spans
    topic = EmbeddedTopic(partitions=1)
    topic.produce([(b"k0", b"ok"), (b"k1", b"bad"), (b"k2", b"ok")])

    def handle(messages: list[laneway.Message]) -> None:
        if any(message.value == b"bad" for message in messages):
            raise ValueError("bad in batch")

    laneway.Consumer(
        topic.source("batched"),
        handle,
        batch_size=3,
        batch_wait=0.5,
        max_retries=0,
        handle_signals=False,
    ).run(max_messages=3, idle_timeout=30)
    calls = [s for s in exporter.get_finished_spans() if s.name == f"process {topic.name}"]
    linked = {format(link.context.trace_id, "032x") for call in calls for link in call.links}
    [(_, _, headers)] = topic.read(f"{topic.name}.dlq", 1)
    trace_id = dict(headers)["traceparent"].decode().split("-")[1]
    assert trace_id in linked, "the failed call links to the dead letter's trace"
    for call in calls:
        assert call.attributes is not None
        assert call.attributes["messaging.batch.message_count"] == len(call.links)


def test_a_message_with_a_traceparent_keeps_its_producer_s_trace(
    spans: tuple[InMemorySpanExporter, Path],
) -> None:
    exporter, _ = spans
    topic = EmbeddedTopic(partitions=1)
    parent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    topic.produce([(b"k", b"bad", [("traceparent", parent.encode())])])
    laneway.Consumer(
        topic.source("traced"),
        process_handlers.fail_bad_amounts,
        max_retries=0,
        handle_signals=False,
    ).run(max_messages=1, idle_timeout=30)
    [attempt] = [s for s in exporter.get_finished_spans() if s.name == f"process {topic.name}"]
    assert format(attempt.context.trace_id, "032x") == "0af7651916cd43dd8448eb211c80319c"
    [(_, _, headers)] = topic.read(f"{topic.name}.dlq", 1)
    assert "0af7651916cd43dd8448eb211c80319c" in dict(headers)["traceparent"].decode()


@pytest.mark.kafka
def test_kafka_timestamps_from_the_future_are_counted_per_topic(kafka_bootstrap: str) -> None:
    topic = KafkaTopic(kafka_bootstrap, 2)
    other = kafka_helpers.unique_name("skew-other")
    kafka_helpers.create_topic(kafka_bootstrap, other, 1)
    now_ms = int(time.time() * 1000)
    produce_at(topic, [now_ms + AHEAD_MS, now_ms])
    kafka_helpers.produce(kafka_bootstrap, other, [(b"k", b"v")])
    metrics = PrometheusMetrics()
    port = metrics.serve(0, "127.0.0.1")
    source = laneway.KafkaSource(
        kafka_bootstrap, kafka_helpers.unique_name("g"), [topic.name, other]
    )
    laneway.Consumer(source, lambda m: None, metrics=metrics, handle_signals=False).run(
        max_messages=3, idle_timeout=30
    )
    skew = scrape(port)["laneway_clock_skew_total"]
    assert skew[(("topic", topic.name),)] == 1
    assert skew.get((("topic", other),), 0) == 0
