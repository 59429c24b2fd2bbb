"""Prometheus metrics scraped over HTTP and OpenTelemetry spans, through real runs."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import process_handlers
import pytest
import tracing_support
from metrics_scrape import scrape
from opentelemetry import propagate, trace
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from topics import SOURCES, EmbeddedTopic, LogTopic

import laneway
from laneway.observability.prometheus import PrometheusMetrics
from laneway.observability.start import start_tracing
from laneway.options import TracingMode
from laneway.types import Message


@pytest.mark.parametrize("source_kind", SOURCES)
def test_metrics_scraped_during_and_after_a_run_add_up(
    source_kind: str, make_topic: Callable[[str, int], LogTopic]
) -> None:
    topic = make_topic(source_kind, 4)
    topic.produce([(b"k%d" % (i % 40), b"v") for i in range(2_000)])
    metrics = PrometheusMetrics()
    port = metrics.serve(0, "127.0.0.1")
    release = threading.Event()

    def handle(message: Message) -> None:
        if message.offset == 10 and message.partition == 0:
            release.wait(10)

    consumer = laneway.Consumer(
        topic.source("scraped"), handle, engine="thread", metrics=metrics, handle_signals=False
    )
    result: list[laneway.ConsumerStats] = []
    runner = threading.Thread(target=lambda: result.append(consumer.run(max_messages=2_000)))
    runner.start()
    oldest: list[float] = []
    deadline = time.monotonic() + 20
    while len(oldest) < 3 and time.monotonic() < deadline:
        time.sleep(0.6)
        during = scrape(port)
        value = during.get("laneway_oldest_unfinished_seconds", {}).get(
            (("partition", "0"), ("topic", topic.name))
        )
        if value and (not oldest or value != oldest[-1]):  # wait for the gauge to refresh
            oldest.append(value)
    release.set()
    runner.join(30)
    assert len(oldest) == 3 and oldest == sorted(oldest) and oldest[-1] > oldest[0], oldest
    after = scrape(port)
    by_topic = (("topic", topic.name),)
    assert after["laneway_messages_processed_total"][by_topic] == 2_000 == result[0].processed
    assert after["laneway_end_to_end_latency_seconds_count"][by_topic] == 2_000
    assert after["laneway_handler_duration_seconds_count"][by_topic] == 2_000
    slow = after["laneway_handler_duration_seconds_bucket"][(("le", "+Inf"), *by_topic)]
    assert slow == 2_000
    for partition in range(4):
        labels = (("partition", str(partition)), ("topic", topic.name))
        assert after["laneway_consumer_lag"][labels] == 0
        assert after["laneway_committed_offset"][labels] == topic.end_offsets()[partition]
        assert after["laneway_oldest_unfinished_seconds"][labels] == 0
    assert after["laneway_buffered"][()] == 0
    assert after["laneway_rebalances_total"][()] >= 1


def produce_traced(topic: LogTopic, values: list[bytes]) -> dict[int, str]:
    """Produce one message per value, each with the traceparent of a producer span; the
    producer span id of each, by the message's position in ``values``."""
    tracer = trace.get_tracer("test-producer")
    records = []
    parents = {}
    for index, value in enumerate(values):
        with tracer.start_as_current_span("send", kind=trace.SpanKind.PRODUCER) as span:
            carrier: dict[str, str] = {}
            propagate.inject(carrier)
            parents[index] = format(span.get_span_context().span_id, "016x")
        headers = [(name, text.encode()) for name, text in carrier.items()]
        records.append((b"k%d" % index, value, headers))
    topic.produce(records)  # type: ignore[arg-type]
    return parents


@pytest.mark.parametrize("source_kind", SOURCES)
@pytest.mark.parametrize("engine", ["thread", "process"])
def test_each_attempt_is_a_span_in_the_producer_s_trace_and_dead_letters_continue_it(
    engine: str,
    source_kind: str,
    make_topic: Callable[[str, int], LogTopic],
    spans: tuple[InMemorySpanExporter, Path],
) -> None:
    exporter, worker_file = spans
    topic = make_topic(source_kind, 1)
    parents = produce_traced(topic, [b"ok", b"bad", b"ok"])
    handler = process_handlers.fail_bad_amounts
    laneway.Consumer(
        topic.source("traced"),
        handler,
        engine=engine,
        concurrency=1,
        max_retries=1,
        retry_backoff=0.001,
        handle_signals=False,
    ).run(max_messages=3)
    local = [tracing_support.span_record(span) for span in exporter.get_finished_spans()]
    attempts = [s for s in local + tracing_support.read_spans(worker_file)
                if s["name"] == f"process {topic.name}"]  # fmt: skip
    assert len(attempts) == 4, "one span per attempt: 1 + 2 retries of the failing one + 1"
    by_parent: dict[str | None, list[dict[str, Any]]] = {}
    for span in attempts:
        by_parent.setdefault(span["parent_id"], []).append(span)
    assert sorted(len(v) for v in by_parent.values()) == [1, 1, 2]
    assert set(by_parent) == set(parents.values()), "parent: the producer's span"
    failing = by_parent[parents[1]]
    assert [s["status"] for s in failing] == ["ERROR", "ERROR"]
    assert all("exception" in s["events"] for s in failing)
    assert [s["status"] for s in by_parent[parents[0]]] == ["UNSET"]
    attributes = attempts[0]["attributes"]
    assert attributes["messaging.system"] == (
        "kafka" if source_kind == "kafka" else "laneway-embedded"
    )
    assert attributes["messaging.destination.name"] == topic.name
    assert attributes["messaging.destination.partition.id"] == "0"
    assert attributes["messaging.consumer.group.name"] == "traced"
    assert {s["attributes"]["messaging.kafka.offset"] for s in attempts} == {0, 1, 2}
    if engine == "process":
        assert all(s["pid"] != attempts[0]["pid"] or s in attempts for s in attempts)
        assert {s["pid"] for s in attempts}.isdisjoint({tracing_support.os.getpid()})
    [(_, _, headers)] = topic.read(f"{topic.name}.dlq", 1)
    traceparent = dict(headers)["traceparent"].decode()
    _, trace_id, parent_id, _ = traceparent.split("-")
    send = next(s for s in local if s["name"] == f"send {topic.name}.dlq")
    assert send["kind"] == "PRODUCER" and send["span_id"] == parent_id
    assert send["parent_id"] == parents[1] and send["trace_id"] == trace_id
    assert failing[0]["trace_id"] == trace_id, "the dead letter continues the message's trace"


@pytest.mark.parametrize("engine", ["sync", "async"])
def test_a_batch_call_is_one_span_linked_to_each_message_s_trace(
    engine: str, spans: tuple[InMemorySpanExporter, Path]
) -> None:
    exporter, _ = spans
    topic = EmbeddedTopic(partitions=1)
    parents = produce_traced(topic, [b"a", b"b", b"c", b"d"])
    sizes: list[int] = []

    def handle(messages: list[laneway.Message]) -> None:
        sizes.append(len(messages))

    async def handle_async(messages: list[laneway.Message]) -> None:
        handle(messages)

    laneway.Consumer(
        topic.source("batched"),
        handle_async if engine == "async" else handle,
        engine=engine,
        batch_size=4,
        batch_wait=0.5,
        handle_signals=False,
    ).run(max_messages=4)
    assert sum(sizes) == 4  # the sync engine batches what each poll returned
    batch_spans = [s for s in exporter.get_finished_spans() if s.name == f"process {topic.name}"]
    assert len(batch_spans) == len(sizes), "one span per batch call"
    linked: list[str] = []
    for span, size in zip(batch_spans, sizes, strict=True):
        assert span.attributes is not None
        assert span.attributes["messaging.batch.message_count"] == size
        assert span.parent is None, "a batch starts a trace of its own"
        assert len(span.links) == size
        linked += [format(link.context.span_id, "016x") for link in span.links]
    assert sorted(linked) == sorted(parents.values()), "a link per message, to its producer span"


def test_without_an_sdk_nothing_is_traced_and_nothing_is_wrapped() -> None:
    topic = EmbeddedTopic(partitions=1)
    assert start_tracing(TracingMode.AUTO, topic.source("g")) is None
    assert start_tracing(TracingMode.OFF, topic.source("g")) is None
