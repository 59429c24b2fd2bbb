"""``laneway bench --metrics/--tracing``: the same runs again with instrumentation on.

Each laneway engine row gets a twin, ``<engine>+metrics`` (a :class:`PrometheusMetrics`
backend, not served: the cost of keeping the metrics, not of scraping them),
``<engine>+otel-metrics`` (an :class:`OpenTelemetryMetrics` backend on the SDK with an
in-memory reader that is never read: the cost of recording) or
``<engine>+tracing`` (the OpenTelemetry SDK with a batch span processor whose exporter
drops the spans: the cost of making them), run right after it, so their ratio is
measured side by side. Tracing covers the in-process engines: process-engine workers
would need their own SDK set-up.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from typing import Any

from laneway.bench.pipelines import RESULTS
from laneway.metrics import NO_METRICS, Metrics

INSTRUMENTS = ("metrics", "otel-metrics", "tracing")


def instrumented(engine: str, instruments: Sequence[str]) -> list[str]:
    """The instruments ``engine`` gets a twin row for: the raw loop only ``results``
    (the client's own cost of writing a result, see :mod:`laneway.bench.raw`)."""
    if engine == "raw":
        return [i for i in instruments if i == RESULTS]
    return [i for i in instruments if not (i == "tracing" and engine == "process")]


@contextlib.contextmanager
def instrument(name: str) -> Iterator[Metrics]:
    """The metrics backend for a run with instrument ``name`` ("" for none); with
    ``tracing`` an SDK tracer provider is installed for the run and removed after."""
    if name == "metrics":
        from laneway.observability.prometheus import PrometheusMetrics

        yield PrometheusMetrics()
    elif name == "otel-metrics":
        from opentelemetry.sdk.metrics import MeterProvider
        from opentelemetry.sdk.metrics.export import InMemoryMetricReader

        from laneway.observability.otel_metrics import OpenTelemetryMetrics

        provider = MeterProvider(metric_readers=[InMemoryMetricReader()])
        try:
            yield OpenTelemetryMetrics(provider)
        finally:
            provider.shutdown()
    elif name == "tracing":
        with _sdk_tracing():
            yield NO_METRICS
    else:
        yield NO_METRICS


@contextlib.contextmanager
def _sdk_tracing() -> Iterator[None]:
    from opentelemetry import trace
    from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult

    class Drop(SpanExporter):
        def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
            return SpanExportResult.SUCCESS

    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(Drop()))
    # The API sets its global provider once per process; a benchmark needs it for one run
    # at a time, so the global is swapped and put back (as OpenTelemetry's own tests do).
    previous: Any = trace._TRACER_PROVIDER
    trace._TRACER_PROVIDER = provider
    try:
        yield
    finally:
        trace._TRACER_PROVIDER = previous
        provider.shutdown()


def cost_lines(rows: Sequence[dict[str, Any]]) -> list[str]:
    """Per variant and engine: each twin's throughput relative to the plain row of the same
    run (instrumented twins here, and the batch and results twins of
    :mod:`laneway.bench.pipelines`)."""
    plain = {(r["scenario"], r["variant"], r["engine"]): r for r in rows if "+" not in r["engine"]}
    lines = []
    for row in rows:
        if "+" not in row["engine"]:
            continue
        engine, what = row["engine"].split("+", 1)
        base = plain.get((row["scenario"], row["variant"], engine))
        if base is None or not base["tps"]:
            continue
        ratio = row["tps"] / base["tps"]
        if what in INSTRUMENTS:
            said = f"{engine}: {what} on {ratio:.2f}x of off"
        else:
            said = f"{engine}+{what}: {ratio:.2f}x of {engine}"
        lines.append(
            f"{row['scenario']} {row['variant']} {said} "
            f"({row['tps']:,.0f} vs {base['tps']:,.0f} msg/s)"
        )
    return lines
