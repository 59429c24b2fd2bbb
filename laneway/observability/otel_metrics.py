"""OpenTelemetryMetrics: laneway's metrics as OpenTelemetry instruments (``laneway[otel]``).

::

    from laneway.observability.otel_metrics import OpenTelemetryMetrics

    consumer = laneway.Consumer(source, handle, metrics=OpenTelemetryMetrics())

Only ``opentelemetry-api`` is used: the application configures the SDK's meter provider
and exporter (``opentelemetry-instrument`` with the standard ``OTEL_*`` settings, or its
own ``set_meter_provider`` call) before the backend is created; without one the API's
no-op instruments take the calls.

Names follow OpenTelemetry's style, derived from :class:`~laneway.metrics.Metric`: the
``laneway`` namespace, a dot, the Prometheus name without its ``_total`` or unit suffix
(``laneway.messages_processed``, ``laneway.handler_duration`` in ``s``), so an exporter
to Prometheus gives back the names of :mod:`laneway.metrics`.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import pairwise
from typing import Any

from opentelemetry import metrics as otel

from laneway.metrics import (
    DEFINITIONS,
    Distribution,
    Labels,
    Metric,
    MetricDefinition,
    MetricKind,
)

_SUFFIXES = ("_total", "_seconds")


def instrument_name(metric: Metric) -> str:
    """The OpenTelemetry name of ``metric``: ``laneway_consumer_lag`` ->
    ``laneway.consumer_lag``, ``laneway_retries_total`` -> ``laneway.retries``."""
    name = metric.value
    for suffix in _SUFFIXES:
        name = name.removesuffix(suffix)
    namespace, _, rest = name.partition("_")
    return f"{namespace}.{rest}"


def instrument_unit(spec: MetricDefinition) -> str:
    """The UCUM unit of a definition: ``s`` for seconds, ``{message}`` for counts of things."""
    if spec.unit == "seconds":
        return "s"
    return "{" + spec.unit.removesuffix("s") + "}"


def representatives(bounds: Sequence[float]) -> list[float]:
    """One value inside each bucket of ``bounds`` (and one for beyond the last): the
    middle of the bucket, half the first bound for the first, twice the last bound beyond
    it."""
    values = [bounds[0] / 2]
    values.extend((low + high) / 2 for low, high in pairwise(bounds))
    values.append(bounds[-1] * 2)
    return values


class OpenTelemetryMetrics:
    """A :class:`~laneway.metrics.Metrics` backend on the OpenTelemetry metrics API.

    Counters become ``Counter`` s, gauges synchronous ``Gauge`` s, histograms
    ``Histogram`` s with laneway's bucket bounds as the advised boundaries. laneway hands
    histograms whole completion batches already bucketed (:class:`Distribution`); the API
    takes one value per call, so each observation is recorded at the middle of its bucket
    (:func:`representatives`): bucket counts are exact, sums are exact to within a
    bucket's width. That is one API call per observation, which the Prometheus backend
    avoids: prefer it for consumers of trivial handlers at hundreds of thousands of
    messages a second.

    ``meter_provider``: the provider to take the meter from (default: the global one).
    """

    def __init__(self, meter_provider: otel.MeterProvider | None = None) -> None:
        meter = otel.get_meter("laneway", meter_provider=meter_provider)
        self._counters: dict[Metric, otel.Counter] = {}
        self._gauges: dict[Metric, Any] = {}
        self._histograms: dict[Metric, tuple[otel.Histogram, list[float]]] = {}
        self._labels: dict[Metric, tuple[str, ...]] = {}
        for metric, spec in DEFINITIONS.items():
            name, unit = instrument_name(metric), instrument_unit(spec)
            self._labels[metric] = spec.labels
            if spec.kind is MetricKind.COUNTER:
                self._counters[metric] = meter.create_counter(name, unit, spec.help)
            elif spec.kind is MetricKind.GAUGE:
                self._gauges[metric] = meter.create_gauge(name, unit, spec.help)
            else:
                histogram = meter.create_histogram(
                    name, unit, spec.help, explicit_bucket_boundaries_advisory=spec.buckets
                )
                self._histograms[metric] = (histogram, representatives(spec.buckets))

    def increment(self, metric: Metric, value: float, labels: Labels = ()) -> None:
        self._counters[metric].add(value, self._attributes(metric, labels))

    def gauge(self, metric: Metric, value: float, labels: Labels = ()) -> None:
        self._gauges[metric].set(value, self._attributes(metric, labels))

    def observe(self, metric: Metric, batch: Distribution, labels: Labels = ()) -> None:
        if not batch.count:
            return
        histogram, values = self._histograms[metric]
        attributes = self._attributes(metric, labels)
        below = 0
        for value, at_most in zip(values, (*batch.cumulative, batch.count), strict=True):
            for _ in range(at_most - below):
                histogram.record(value, attributes)
            below = at_most

    def _attributes(self, metric: Metric, labels: Labels) -> dict[str, str] | None:
        if not labels:
            return None
        return dict(zip(self._labels[metric], labels, strict=True))
