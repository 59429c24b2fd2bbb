"""The ``spike`` and ``paced`` benchmarks: open-loop reservation load on Kafka and PostgreSQL
through several consumer topologies, compared in one run on the same data and database.

``spike`` produces ``--messages`` requests (default 1,000) at once while the consumers run
(seed 004); ``paced`` produces ``--rate`` requests a second for ``--duration`` seconds, with
``--slow-db MS`` holding every reservation that long behind one lock during its middle third.
Each topology (:mod:`~laneway.bench.load.topologies`) runs each load in turn, ``--repeat`` times
(interleaved, so drift on a shared machine spreads over all of them); see
:mod:`~laneway.bench.load.run` for one run and :mod:`~laneway.bench.load.report` for the rows.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from laneway.bench.engines.scenarios import (
    LOAD_PARTITIONS,
    LOAD_POOL,
    PACED_DURATION,
    PACED_RATE,
    SPIKE_REQUESTS,
)
from laneway.bench.load.report import load_row, merge_load_rows, variant_of
from laneway.bench.load.run import OK, Load, LoadOutcome, LoadSettings, run_load
from laneway.bench.load.services import CHECKOUT_JAEGER, Services
from laneway.bench.load.topologies import Topology
from laneway.bench.reporting.rows import Row
from laneway.bench.tickets.requests import SpanFactory


@dataclass(frozen=True)
class LoadOptions:
    """The command line's choices for the load benchmarks."""

    scenarios: tuple[str, ...]
    topologies: tuple[Topology, ...]
    requests: int = SPIKE_REQUESTS
    rate: float = PACED_RATE
    duration: float = PACED_DURATION
    partitions: int = LOAD_PARTITIONS
    pool: int = LOAD_POOL
    statement_timeout: float | None = None
    slow_ms: float = 0.0
    bootstrap: str | None = None
    dsn: str | None = None
    topic_prefix: str = "laneway-bench"
    trace_dir: Path | None = None
    repeat: int = 1
    timeout: float = 600.0
    otlp_endpoint: str | None = None
    """Export the producer's and the consumers' spans over OTLP/HTTP to this URL."""
    jaeger: str | None = None
    """Jaeger's query URL: read each run's traces back (:mod:`~laneway.bench.load.jaeger_traces`);
    ``auto``: the checkout's Jaeger, for this and ``otlp_endpoint``."""
    plot_dir: Path | None = None
    """With ``jaeger``: draw each row's longest trace here (see ``waterfall``)."""

    def loads(self) -> list[Load]:
        loads = []
        if "spike" in self.scenarios:
            loads.append(Load("spike", self.requests))
        if "paced" in self.scenarios:
            count = max(1, round(self.rate * self.duration))
            loads.append(Load("paced", count, self.rate, slowed=self.slow_ms > 0))
        return loads


def run_load_bench(options: LoadOptions, say: Callable[[str], None]) -> list[Row]:
    """Every load through every topology; the merged rows (one per topology and load)."""
    rows: list[Row] = []
    with Services(say) as services:
        otlp_endpoint, jaeger = options.otlp_endpoint, options.jaeger
        if jaeger == CHECKOUT_JAEGER:
            endpoints = services.jaeger()
            otlp_endpoint, jaeger = endpoints["otlp_http"], endpoints["query"]
        settings = LoadSettings(
            bootstrap=services.address("kafka", options.bootstrap),
            dsn=services.address("postgres", options.dsn),
            topic_prefix=options.topic_prefix,
            partitions=options.partitions,
            pool=options.pool,
            statement_timeout=options.statement_timeout,
            slow_ms=options.slow_ms,
            trace_dir=options.trace_dir,
            timeout=options.timeout,
            otlp_endpoint=otlp_endpoint,
        )
        send_span = _tracing(options.trace_dir, otlp_endpoint)
        for load in options.loads():
            variant = variant_of(load, options.partitions, options.slow_ms)
            for _ in range(options.repeat):
                for topology in options.topologies:
                    outcome = run_load(settings, topology, load, send_span, say)
                    row = load_row(outcome, variant)
                    if options.trace_dir is not None:
                        row["trace"] = _slowest_trace(options.trace_dir, outcome)
                    if jaeger is not None and outcome.status == OK:
                        row["jaeger"] = _read_back(jaeger, outcome)
                        if row["jaeger"] is not None:  # each repetition's, beside its sell-out
                            row["runs"][0]["longest_trace_ms"] = row["jaeger"]["longest"]["ms"]
                    say(_one_line(row))
                    rows.append(row)
        merged = merge_load_rows(rows)
        if jaeger is not None and options.plot_dir is not None:
            for row in merged:  # before a Jaeger started here stops: its traces go with it
                _draw_longest(jaeger, options.plot_dir, row, say)
    return merged


def _tracing(trace_dir: Path | None, otlp_endpoint: str | None) -> SpanFactory | None:
    if trace_dir is None and otlp_endpoint is None:
        return None
    from laneway.bench.tickets import trace_files

    if trace_dir is not None:
        trace_files.write_spans_to(trace_dir, "producer")
    if otlp_endpoint is not None:
        from laneway.bench.load.jaeger_traces import export_spans_to

        export_spans_to(otlp_endpoint)
    return trace_files.send_span


def _read_back(query: str, outcome: LoadOutcome) -> dict[str, Any] | None:
    """What the run's traces in Jaeger say (after the bench's own spans are flushed; the
    consumers flushed theirs when they stopped)."""
    from laneway.bench.load.jaeger_traces import read_run
    from laneway.bench.load.trace_figures import trace_figures
    from laneway.bench.tickets import trace_files

    trace_files.flush()
    done = [request for request, _, _ in outcome.timings]
    traces = read_run(query, outcome.topic, outcome.prefix, done, outcome.started_ns)
    return trace_figures(traces, outcome.timings)


def _draw_longest(query: str, directory: Path, row: Row, say: Callable[[str], None]) -> None:
    """``trace-<scenario>-<topology>.png``: the row's longest trace as a waterfall, and
    beside it the ``.json`` document Jaeger's query API returned for it."""
    from laneway.bench.load.jaeger_traces import fetch_trace, spans_of
    from laneway.bench.load.waterfall import draw_waterfall

    longest = (row.get("jaeger") or {}).get("longest")
    if not longest:
        return
    document = fetch_trace(query, longest["trace_id"])
    if document is None:
        say(f"trace {longest['trace_id']} is no longer in Jaeger: not drawn")
        return
    directory.mkdir(parents=True, exist_ok=True)
    name = f"trace-{row['scenario']}-{row['engine'].replace(' ', '-')}"
    (directory / f"{name}.json").write_text(json.dumps(document, indent=1) + "\n")
    title = (
        f"{row['scenario']} ({row['variant']}), {row['engine']}: the longest trace, "
        f"{longest['request']}, {longest['ms']:,.0f} ms"
    )
    drawn = draw_waterfall(spans_of(document), directory / f"{name}.png", title)
    say(f"drew {drawn}")


def _slowest_trace(trace_dir: Path, outcome: LoadOutcome) -> list[str]:
    from laneway.bench.tickets import trace_files

    if outcome.slowest is None or outcome.trace_dir is None:
        return []
    trace_files.flush()
    spans = trace_files.read_spans(trace_dir) + trace_files.read_spans(outcome.trace_dir)
    return trace_files.render(trace_files.request_trace(spans, outcome.slowest))


def _one_line(row: Row) -> str:
    head = f"{row['scenario']} {row['variant']} {row['engine']}"
    if row["status"] != OK or not row["latency_ms"]:
        return f"{head}: {row['status']} {row['error'] or ''}"
    return (
        f"{head}: sell-out {row['runtime_s']:.2f} s, p99 {row['latency_ms']['p99']:,.0f} ms, "
        f"{row['done']:,} done, {row['dead_lettered']} dead-lettered, CPU {row['cpu_s']:.2f} s"
    )
