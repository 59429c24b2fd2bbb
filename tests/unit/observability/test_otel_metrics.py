"""OpenTelemetry metrics: the second backend of the metrics protocol, read back through the
SDK's in-memory reader after real runs."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from topics import SOURCES, LogTopic

import laneway
from laneway.metrics import DEFINITIONS, LATENCY_BUCKETS, Distribution, Metric
from laneway.observability.otel_metrics import (
    OpenTelemetryMetrics,
    instrument_name,
    instrument_unit,
    representatives,
)
from laneway.types import Message


def read(reader: InMemoryMetricReader) -> dict[str, dict[tuple[tuple[str, Any], ...], Any]]:
    """name -> sorted attributes -> data point."""
    points: dict[str, dict[tuple[tuple[str, Any], ...], Any]] = {}
    data = reader.get_metrics_data()
    assert data is not None
    for resource in data.resource_metrics:
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                for point in metric.data.data_points:
                    labels = tuple(sorted((point.attributes or {}).items()))
                    points.setdefault(metric.name, {})[labels] = point
    return points


def test_names_and_units_follow_opentelemetry_and_map_back_to_prometheus() -> None:
    assert instrument_name(Metric.MESSAGES_PROCESSED) == "laneway.messages_processed"
    assert instrument_name(Metric.HANDLER_DURATION) == "laneway.handler_duration"
    assert instrument_name(Metric.CONSUMER_LAG) == "laneway.consumer_lag"
    assert instrument_unit(DEFINITIONS[Metric.HANDLER_DURATION]) == "s"
    assert instrument_unit(DEFINITIONS[Metric.MESSAGES_PROCESSED]) == "{message}"
    names = [instrument_name(metric) for metric in Metric]
    assert len(set(names)) == len(names)


def test_batches_are_recorded_in_their_buckets_with_exact_counts() -> None:
    reader = InMemoryMetricReader()
    backend = OpenTelemetryMetrics(MeterProvider(metric_readers=[reader]))
    values = [0.00005, 0.0003, 0.0003, 0.02, 7.0, 1_000.0]
    batch = Distribution.of_values(values, LATENCY_BUCKETS)
    backend.observe(Metric.HANDLER_DURATION, batch, ("orders",))
    point = read(reader)["laneway.handler_duration"][(("topic", "orders"),)]
    assert point.count == 6
    assert tuple(point.explicit_bounds) == LATENCY_BUCKETS
    expected = [0] * (len(LATENCY_BUCKETS) + 1)
    for value in values:
        expected[sum(value > bound for bound in LATENCY_BUCKETS)] += 1
    assert list(point.bucket_counts) == expected
    middles = representatives(LATENCY_BUCKETS)
    bounds = (0.0, *LATENCY_BUCKETS, float("inf"))
    inside = zip(bounds, middles, bounds[1:], strict=False)
    assert all(low < mid <= high for low, mid, high in inside)


@pytest.mark.parametrize("source_kind", SOURCES)
def test_a_run_reports_counts_histograms_and_gauges_through_the_sdk(
    source_kind: str, make_topic: Callable[[str, int], LogTopic]
) -> None:
    topic = make_topic(source_kind, 3)
    topic.produce([(b"k%d" % (i % 20), b"fail" if i % 100 == 7 else b"ok") for i in range(600)])
    reader = InMemoryMetricReader()
    backend = OpenTelemetryMetrics(MeterProvider(metric_readers=[reader]))

    def handle(message: Message) -> None:
        if message.value == b"fail":
            raise ValueError("bad amount")

    stats = laneway.Consumer(
        topic.source("otel-metrics"),
        handle,
        engine="thread",
        metrics=backend,
        max_retries=1,
        retry_backoff=0.001,
        handle_signals=False,
    ).run(max_messages=600)
    points = read(reader)
    by_topic = (("topic", topic.name),)
    assert points["laneway.messages_processed"][by_topic].value == stats.processed == 594
    assert points["laneway.messages_failed"][by_topic].value == stats.failed == 6
    assert points["laneway.retries"][by_topic].value == 6
    assert points["laneway.dead_letters"][by_topic].value == 6
    assert points["laneway.handler_duration"][by_topic].count == 594
    # settled messages, the dead-lettered ones included
    assert points["laneway.end_to_end_latency"][by_topic].count == 600
    for partition in range(3):
        labels = (("partition", str(partition)), ("topic", topic.name))
        assert points["laneway.consumer_lag"][labels].value == 0
        assert points["laneway.committed_offset"][labels].value == topic.end_offsets()[partition]
    assert points["laneway.buffered"][()].value == 0
    assert points["laneway.rebalances"][()].value >= 1
