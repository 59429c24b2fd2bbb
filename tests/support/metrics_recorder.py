"""A metrics backend for tests that keeps every call, checking each against its definition."""

from __future__ import annotations

from collections import defaultdict

from laneway.metrics import DEFINITIONS, Distribution, Metric, MetricKind


class Recorder:
    """A Metrics backend that keeps every call."""

    def __init__(self) -> None:
        self.counters: dict[tuple[Metric, tuple[str, ...]], float] = defaultdict(float)
        self.gauges: dict[tuple[Metric, tuple[str, ...]], float] = {}
        self.observed: dict[tuple[Metric, tuple[str, ...]], list[Distribution]] = defaultdict(list)

    def increment(self, metric: Metric, value: float, labels: tuple[str, ...] = ()) -> None:
        assert DEFINITIONS[metric].kind is MetricKind.COUNTER
        assert len(labels) == len(DEFINITIONS[metric].labels)
        self.counters[(metric, labels)] += value

    def gauge(self, metric: Metric, value: float, labels: tuple[str, ...] = ()) -> None:
        assert DEFINITIONS[metric].kind is MetricKind.GAUGE
        assert len(labels) == len(DEFINITIONS[metric].labels)
        self.gauges[(metric, labels)] = value

    def observe(self, metric: Metric, batch: Distribution, labels: tuple[str, ...] = ()) -> None:
        assert DEFINITIONS[metric].kind is MetricKind.HISTOGRAM
        assert len(batch.cumulative) == len(DEFINITIONS[metric].buckets)
        self.observed[(metric, labels)].append(batch)
