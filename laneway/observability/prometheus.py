"""PrometheusMetrics: laneway's metrics in the Prometheus text format (``laneway[metrics]``).

::

    from laneway.observability.prometheus import serve_metrics

    consumer = laneway.Consumer(source, handle, metrics=serve_metrics(9108))  # /metrics

``/metrics`` listens on 127.0.0.1 unless told otherwise (``serve_metrics(9108,
"0.0.0.0")`` for every interface, e.g. in a container scraped from outside). ``laneway run
--metrics-port 9108`` does the same (``--metrics-address``; member *i* of ``--members``
serves on port + *i*).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator

from prometheus_client import CollectorRegistry, Counter, Gauge
from prometheus_client.core import HistogramMetricFamily
from prometheus_client.exposition import choose_encoder
from prometheus_client.registry import Collector

from laneway.metrics import (
    DEFINITIONS,
    Distribution,
    Labels,
    Metric,
    MetricDefinition,
    MetricKind,
)
from laneway.observability.bounded_http import BoundedServer
from laneway.observability.http_request import Request

LOOPBACK = "127.0.0.1"
"""Where ``/metrics`` listens unless an address is given."""


class _BulkHistogram(Collector):
    """A histogram that takes observations as bucketed batches (:class:`Distribution`),
    where ``Histogram.observe`` per value would cost a lock and a Python call per
    message."""

    def __init__(self, name: str, spec: MetricDefinition) -> None:
        self._name = name
        self._spec = spec
        self._lock = threading.Lock()
        self._series: dict[Labels, tuple[list[int], list[float]]] = {}

    def observe(self, batch: Distribution, labels: Labels) -> None:
        bounds = self._spec.buckets
        with self._lock:
            cumulative, totals = self._series.setdefault(labels, ([0] * len(bounds), [0.0, 0.0]))
            for index, count in enumerate(batch.cumulative):
                cumulative[index] += count
            totals[0] += batch.total
            totals[1] += batch.count

    def collect(self) -> Iterator[HistogramMetricFamily]:
        family = HistogramMetricFamily(self._name, self._spec.help, labels=self._spec.labels)
        with self._lock:
            for labels, (cumulative, (total, count)) in self._series.items():
                buckets = [
                    (repr(bound), float(n))
                    for bound, n in zip(self._spec.buckets, cumulative, strict=True)
                ]
                buckets.append(("+Inf", count))
                family.add_metric(list(labels), buckets, total)
        yield family


class PrometheusMetrics:
    """A :class:`~laneway.metrics.Metrics` backend that keeps every metric of
    :data:`~laneway.metrics.DEFINITIONS` in a Prometheus registry (its own unless one is
    given), for :meth:`serve` or your own exporter.

    Counters and gauges are prometheus-client's; histograms take each completion batch in
    one pass (see ``_BulkHistogram``), which keeps the cost at a few percent of a trivial
    handler's throughput. Series of partitions a consumer no longer owns stay at their
    last value.
    """

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()
        self._counters: dict[Metric, Counter] = {}
        self._gauges: dict[Metric, Gauge] = {}
        self._histograms: dict[Metric, _BulkHistogram] = {}
        for metric, spec in DEFINITIONS.items():
            if spec.kind is MetricKind.COUNTER:
                self._counters[metric] = Counter(
                    metric.value, spec.help, spec.labels, registry=self.registry
                )
            elif spec.kind is MetricKind.GAUGE:
                self._gauges[metric] = Gauge(
                    metric.value, spec.help, spec.labels, registry=self.registry
                )
            else:
                histogram = _BulkHistogram(metric.value, spec)
                self.registry.register(histogram)
                self._histograms[metric] = histogram

    def increment(self, metric: Metric, value: float, labels: Labels = ()) -> None:
        counter = self._counters[metric]
        (counter.labels(*labels) if labels else counter).inc(value)

    def gauge(self, metric: Metric, value: float, labels: Labels = ()) -> None:
        gauge = self._gauges[metric]
        (gauge.labels(*labels) if labels else gauge).set(value)

    def observe(self, metric: Metric, batch: Distribution, labels: Labels = ()) -> None:
        if batch.count:
            self._histograms[metric].observe(batch, labels)

    def serve(self, port: int, address: str = LOOPBACK) -> int:
        """Serve ``GET /metrics`` on ``address:port`` from a daemon thread; the port (0
        picks a free one). Loopback by default: ``"0.0.0.0"`` or ``"::"`` serves every
        interface. The text format, or OpenMetrics when the scraper's ``Accept`` asks for
        it. The server is bounded like the health probes'
        (:mod:`~laneway.observability.bounded_http`): connections cost no thread, 256 at
        most, 5 s each, so slow clients cannot keep a scraper from its answer."""
        registry = self.registry

        def answer(request: Request) -> None:
            if request.path.split("?", 1)[0] != "/metrics":
                request.reply(404, "text/plain; charset=utf-8", b"try /metrics\n")
                return
            encode, content_type = choose_encoder(request.headers.get("Accept", ""))
            request.reply(200, content_type, encode(registry))

        server = BoundedServer((address, port), answer, name="laneway-metrics")
        threading.Thread(target=server.serve_forever, name="laneway-metrics", daemon=True).start()
        return server.port


def serve_metrics(port: int, address: str = LOOPBACK) -> PrometheusMetrics:
    """A new :class:`PrometheusMetrics` already serving ``/metrics`` on ``address:port``
    (127.0.0.1 unless given: ``"0.0.0.0"`` or ``"::"`` for every interface): pass it as
    ``Consumer(..., metrics=...)``."""
    metrics = PrometheusMetrics()
    metrics.serve(port, address)
    return metrics
