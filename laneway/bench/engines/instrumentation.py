"""``laneway bench --metrics/--tracing``: the same runs again with instrumentation on.

Each laneway engine row gets a twin, ``<engine>+metrics`` (a :class:`PrometheusMetrics`
backend, not served: the cost of keeping the metrics, not of scraping them),
``<engine>+otel-metrics`` (an :class:`OpenTelemetryMetrics` backend on the SDK with an
in-memory reader that is never read: the cost of recording) or
``<engine>+tracing`` (the OpenTelemetry SDK with a batch span processor whose exporter
drops the spans: the cost of making them) or ``<engine>+status`` (the status page served
as ``laneway run`` serves it, its history sampled every second, and ``/status.json`` read
every second as an open page reads it: the cost of keeping and showing the page's data),
run right after it, so their ratio is measured side by side. Tracing covers the in-process
engines: process-engine workers would need their own SDK set-up.
"""

from __future__ import annotations

import contextlib
import statistics
import threading
import urllib.request
from collections.abc import Iterator, Sequence
from typing import Any

from laneway.bench.engines.pipelines import BATCH, BATCH_STATE, RESULTS, STATEFUL
from laneway.consumer import Consumer
from laneway.metrics import NO_METRICS, Metrics

STATUS = "status"
INSTRUMENTS = ("metrics", "otel-metrics", "tracing", STATUS)
PAGE_READ_EVERY = 1.0
"""Seconds between two reads of ``/status.json`` in the status twin (the page's own rate)."""


def instrumented(engine: str, instruments: Sequence[str]) -> list[str]:
    """The instruments ``engine`` gets a twin row for: the raw loop only ``results``
    (the client's own cost of writing a result, see :mod:`laneway.bench.engines.raw`), the
    ceiling loop none."""
    if engine == "ceiling":
        return []
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
def status_page(consumer: Consumer) -> Iterator[None]:
    """``consumer``'s status page on a free loopback port, as ``laneway run`` serves it,
    and a reader of ``/status.json`` every :data:`PAGE_READ_EVERY` seconds (an open page)."""
    from laneway.service.health_server import HealthServer
    from laneway.status.member import MemberStatus

    status = MemberStatus(consumer)
    server = HealthServer(consumer.health, 0, backlog=consumer.backlog, status=status)
    server.start()
    stop = threading.Event()
    url = f"http://127.0.0.1:{server.port}/status.json"

    def read() -> None:
        while not stop.wait(PAGE_READ_EVERY):
            with contextlib.suppress(OSError), urllib.request.urlopen(url, timeout=5) as answer:
                answer.read()

    reader = threading.Thread(target=read, name="laneway-bench-page", daemon=True)
    reader.start()
    try:
        yield
    finally:
        stop.set()
        reader.join(10.0)
        server.stop()


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
    :mod:`laneway.bench.engines.pipelines`).

    With ``--repeat``, a twin runs right after its plain row in every repetition, so the
    ratio is taken per repetition and the median of those is reported, with each one: the
    machine's drift between repetitions moves both rows of a repetition alike, and a ratio
    of two medians could pair rows of different repetitions."""
    named = {(r["scenario"], r["variant"], r["engine"]): r for r in rows}
    lines = []
    for row in rows:
        if "+" not in row["engine"]:
            continue
        engine, what = row["engine"].split("+", 1)
        # The batch handler's state twin is measured against the batch twin: what state
        # adds to a batch handler.
        against = f"{engine}+{BATCH}" if what == BATCH_STATE else engine
        base = named.get((row["scenario"], row["variant"], against))
        if base is None or not base["tps"]:
            continue
        ratios = paired_ratios(row, base)
        ratio = statistics.median(ratios)
        if what in INSTRUMENTS:
            said = f"{engine}: {what} on {ratio:.2f}x of off"
        else:
            said = f"{engine}+{what}: {ratio:.2f}x of {against}"
        if what in STATEFUL:
            said += f", {per_message_cost(row, base):+.1f} us per message"
        each = ""
        if len(ratios) > 1:
            each = f"; per repetition {', '.join(f'{r:.2f}' for r in ratios)}"
        lines.append(
            f"{row['scenario']} {row['variant']} {said} "
            f"({row['tps']:,.0f} vs {base['tps']:,.0f} msg/s{each})"
        )
    return lines


def per_message_cost(row: dict[str, Any], base: dict[str, Any]) -> float:
    """What ``row`` adds to each message over ``base``, in microseconds: the difference of
    their times per message, the median over repetitions (paired as for the ratios)."""
    runs, base_runs = row.get("tps_runs") or [], base.get("tps_runs") or []
    if not (len(runs) > 1 and len(runs) == len(base_runs) and all(runs) and all(base_runs)):
        runs, base_runs = [row["tps"]], [base["tps"]]
    costs: list[float] = [1e6 / t - 1e6 / b for t, b in zip(runs, base_runs, strict=True)]
    return statistics.median(costs)


def paired_ratios(row: dict[str, Any], base: dict[str, Any]) -> list[float]:
    """``row``'s msg/s over ``base``'s, repetition by repetition (both rows' ``tps_runs``
    are in the order the repetitions ran); the two medians' ratio when they did not run
    equally often (a row that failed in one repetition)."""
    runs, base_runs = row.get("tps_runs") or [], base.get("tps_runs") or []
    if len(runs) > 1 and len(runs) == len(base_runs) and all(base_runs):
        return [tps / base_tps for tps, base_tps in zip(runs, base_runs, strict=True)]
    return [row["tps"] / base["tps"]]
