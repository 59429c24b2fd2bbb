"""Rows, the table and the verdict of the ``spike`` and ``paced`` benchmarks.

A load row has the keys every bench row has (``scenario``, ``variant``, ``engine`` — here
the topology's name —, ``status``, ``messages``, ``lost``, ``duplicates``,
``ordering_check``, ``runtime_s``, ``tps``, ``latency_ms``, ``latency_cdf``), so ``--json``,
``compare`` and the validity check treat it like any other, and these of its own:
``topology`` (``engine``, ``concurrency``, ``members``, ``adaptive``, ``max_rate``),
``done`` (requests with an outcome), ``dead_lettered`` (requests that failed for good and
went to the dead-letter topic), ``database_check`` (``PASS`` unless a seat rule broke:
``conflicts`` says which), ``cpu_s`` and ``per_cpu_s`` (requests done per CPU second of
all consumer processes), ``peak_rss_mb`` (their summed peak RSS), ``slow_window_s`` (when
the database was slowed, in seconds after the first produce), ``slowest_request`` and
``trace`` (its trace, rendered, with ``--traces``). ``runtime_s`` is first produce -> last
outcome (the sell-out time of a spike); ``latency_ms`` adds ``p999``; ``lost`` counts
requests with neither an outcome nor a dead letter.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from typing import Any

from hdrh.histogram import HdrHistogram
from rich.console import Console
from rich.table import Table

from laneway.bench.engines.analysis import CDF_PERCENTILES, FAIL, NOT_APPLICABLE, PASS
from laneway.bench.load.run import OK, Load, LoadOutcome
from laneway.bench.reporting.rows import Row, is_valid

_HIGHEST_US = 3_600_000_000

FOOTNOTE = (
    "sell-out: first produce -> last outcome written (spike: the seed's sell-out time; paced: "
    "the whole run). latency: the request's intended send time (its record timestamp: the "
    "spike's start, or its slot in the paced schedule) -> its outcome written in the "
    "database, just before its commit, so a late send counts against the run. CPU s: user + "
    "system seconds of every consumer process (members included) from the first produce to "
    "the last outcome; req/CPU s = requests done per such second; RSS: their peak resident "
    "memory, summed. DLQ: requests that failed for good (dead letters, no outcome); lost: "
    "neither outcome nor dead letter."
)


def variant_of(load: Load, partitions: int, slow_ms: float) -> str:
    """How the load reads in a row, e.g. ``1,000 at once, p8`` or ``300/s x 20 s, p8``."""
    if load.rate is None:
        text = f"{load.count:,} at once, p{partitions}"
    else:
        text = f"{load.rate:g}/s x {load.duration:g} s, p{partitions}"
    if load.slowed:
        text += f", slowed {slow_ms:g} ms"
    return text


def load_row(outcome: LoadOutcome, variant: str) -> Row:
    """The row of one run (see the module docstring for its keys)."""
    topology, load = outcome.topology, outcome.load
    done = len(outcome.timings)
    row: Row = {
        "scenario": load.scenario,
        "variant": variant,
        "engine": topology.name,
        "topology": {
            "engine": topology.engine.value,
            "concurrency": topology.concurrency,
            "members": topology.members,
            "adaptive": topology.adaptive,
            "max_rate": topology.max_rate,
        },
        "status": outcome.status,
        "error": outcome.error,
        "messages": load.count,
        "done": done,
        "dead_lettered": outcome.dead_letters,
        "lost": max(0, load.count - done - outcome.dead_letters),
        "duplicates": 0,
        "ordering_check": NOT_APPLICABLE,
        "database_check": FAIL if outcome.conflicts else PASS,
        "conflicts": outcome.conflicts[:10],
        "runtime_s": 0.0,
        "tps": 0.0,
        "latency_ms": None,
        "latency_cdf": [],
        "cpu_s": outcome.cpu_s,
        "per_cpu_s": done / outcome.cpu_s if outcome.cpu_s > 0 else None,
        "peak_rss_mb": outcome.peak_rss_mb,
        "slow_window_s": None,
        "slowest_request": outcome.slowest,
        "trace": [],
        "repeats": 1,
        "runs": [],
        "profiles": [],
    }
    if outcome.timings:
        first = min(produced for _, produced, _ in outcome.timings)
        last = max(done_at for _, _, done_at in outcome.timings)
        row["runtime_s"] = last - first
        row["tps"] = done / (last - first) if last > first else 0.0
        row["latency_ms"], row["latency_cdf"] = latency_figures(outcome.timings)
        if outcome.slow_window is not None:
            row["slow_window_s"] = [outcome.slow_window[0] - first, outcome.slow_window[1] - first]
    if outcome.conflicts and row["status"] == OK:
        row["status"] = "ERROR"
        row["error"] = "; ".join(outcome.conflicts[:3])
    row["runs"] = [_run_summary(row)]
    return row


def latency_figures(
    timings: Sequence[tuple[str, float, float]],
) -> tuple[dict[str, float], list[Any]]:
    """``avg``, ``p50`` ... ``max`` (ms) and the CDF of ``(id, start, end)`` Unix times."""
    histogram = HdrHistogram(1, _HIGHEST_US, 3)
    for _, produced, done in timings:
        histogram.record_value(min(max(1, int((done - produced) * 1e6)), _HIGHEST_US))
    at = histogram.get_value_at_percentile
    figures = {
        "avg": histogram.get_mean_value() / 1e3,
        "p50": at(50) / 1e3,
        "p95": at(95) / 1e3,
        "p99": at(99) / 1e3,
        "p999": at(99.9) / 1e3,
        "max": histogram.get_max_value() / 1e3,
    }
    return figures, [[p, at(p) / 1e3] for p in CDF_PERCENTILES]


def _run_summary(row: Row) -> dict[str, Any]:
    latency = row["latency_ms"] or {}
    return {"sell_out_s": row["runtime_s"], "p99_ms": latency.get("p99"), "status": row["status"]}


def merge_load_rows(rows: Sequence[Row]) -> list[Row]:
    """One row per (scenario, variant, topology): the repetition with the median sell-out
    time, with every repetition's sell-out and p99 in ``runs``; the worst status, the most
    dead letters and losses."""
    groups: dict[tuple[str, str, str], list[Row]] = {}
    for row in rows:
        groups.setdefault((row["scenario"], row["variant"], row["engine"]), []).append(row)
    merged = []
    for reps in groups.values():
        ranked = sorted(reps, key=lambda r: (r["status"] != OK, r["runtime_s"]))
        row = dict(ranked[(len(ranked) - 1) // 2])
        row["runs"] = [run for r in reps for run in r["runs"]]
        row["repeats"] = len(reps)
        row["dead_lettered"] = max(r["dead_lettered"] for r in reps)
        row["lost"] = max(r["lost"] for r in reps)
        if any(r["status"] != OK for r in reps):
            row["status"] = next(r["status"] for r in reps if r["status"] != OK)
        merged.append(row)
    return merged


def load_table(rows: Sequence[Row], title: str) -> Table:
    table = Table(title=title, header_style="bold")
    for name in (
        "scenario", "variant", "topology", "done", "DLQ", "lost", "sell-out s", "req/s",
        "latency ms p50 / p95 / p99 / p99.9 / max", "CPU s", "req/CPU s", "RSS MB",
    ):  # fmt: skip
        table.add_column(name, justify="left" if name in ("scenario", "variant") else "right")
    for row in rows:
        latency = row["latency_ms"]
        cells = "-"
        if latency:
            cells = " / ".join(f"{latency[k]:,.0f}" for k in ("p50", "p95", "p99", "p999", "max"))
        sell_out = " / ".join(f"{run['sell_out_s']:.2f}" for run in row["runs"])
        status = "" if row["status"] == OK else f"[red]{row['status']}[/red] "
        per_cpu = row["per_cpu_s"]
        table.add_row(
            row["scenario"],
            row["variant"],
            row["engine"],
            f"{status}{row['done']:,}",
            _marked(row["dead_lettered"]),
            _marked(row["lost"]),
            sell_out,
            f"{row['tps']:,.0f}",
            cells,
            f"{row['cpu_s']:.2f}",
            "-" if per_cpu is None else f"{per_cpu:,.0f}",
            f"{row['peak_rss_mb']:,.0f}",
        )
    return table


def _marked(count: int) -> str:
    return f"[red]{count:,}[/red]" if count else "0"


def verdict(rows: Sequence[Row]) -> list[str]:
    """Per scenario and variant: which topology wins on sell-out (spike only), on p99, per
    CPU second and on memory, with the runner-up, among runs that finished every request."""
    lines: list[str] = []
    for key in dict.fromkeys((r["scenario"], r["variant"]) for r in rows):
        mine = [
            r
            for r in rows
            if (r["scenario"], r["variant"]) == key and is_valid(r) and r["dead_lettered"] == 0
        ]
        if len(mine) < 2:
            continue
        lines.append(f"{key[0]} {key[1]}:")
        if key[0] == "spike":  # a paced run lasts as long as its producer, whoever consumes
            lines.append("  " + _best(mine, "sell-out", lambda r: r["runtime_s"], "{:.2f} s"))
        lines.append("  " + _best(mine, "p99", lambda r: r["latency_ms"]["p99"], "{:,.0f} ms"))
        per_cpu = _best(
            mine, "requests per CPU second", lambda r: -(r["per_cpu_s"] or 0.0), "{:,.0f}"
        )
        lines.append("  " + per_cpu)
        lines.append("  " + _best(mine, "peak RSS", lambda r: r["peak_rss_mb"], "{:,.0f} MB"))
    return lines


def _best(rows: Sequence[Row], what: str, key: Any, shown: str) -> str:
    ranked = sorted(rows, key=key)
    first, second = ranked[0], ranked[1]
    a, b = abs(key(first)), abs(key(second))
    spread = ""
    if len(ranked) > 2:
        spread = f"; median of all {shown.format(abs(statistics.median(key(r) for r in rows)))}"
    return (
        f"{what}: {first['engine']} {shown.format(a)} (next: {second['engine']} "
        f"{shown.format(b)}{spread})"
    )


def print_load_report(console: Console, rows: Sequence[Row], title: str) -> None:
    console.print(load_table(rows, title))
    console.print(FOOTNOTE, style="dim", soft_wrap=False)
    slowed = [r for r in rows if r["slow_window_s"]]
    for row in slowed[:1]:
        start, end = row["slow_window_s"]
        console.print(
            f"slowed: reservations held one lock from about {start:.1f} s to {end:.1f} s "
            "after the first produce",
            style="dim",
        )
    lines = verdict(rows)
    if lines:
        console.print()
        console.print("[bold]Which topology wins[/bold] (runs that finished every request)")
        for line in lines:
            console.print(f"  {line}", highlight=False)
    print_jaeger_figures(console, rows)
    traced = [r for r in rows if r["trace"]]
    for row in traced:
        console.print()
        console.print(
            f"[bold]Slowest request[/bold] of {row['scenario']} {row['engine']} "
            f"({row['slowest_request']}, {row['latency_ms']['max']:,.0f} ms):",
            highlight=False,
        )
        for line in row["trace"]:
            console.print(f"  {line}", highlight=False, soft_wrap=True, markup=False)


def print_jaeger_figures(console: Console, rows: Sequence[Row]) -> None:
    """With ``--jaeger``: per run, what its traces in Jaeger say beside the bench's own
    figures (see :mod:`laneway.bench.load.trace_figures`), and its longest trace."""
    traced = [r for r in rows if r.get("jaeger")]
    if not traced:
        return
    from laneway.bench.tickets.trace_files import render  # the OpenTelemetry SDK's module

    table = Table(title="Read back from Jaeger (trace lengths) vs the bench", header_style="bold")
    for name in (
        "scenario", "topology", "traces", "longest trace ms (runs)", "sell-out s: traces / bench",
        "p50 / p95 / p99 ms: traces", "p50 / p95 / p99 ms: bench",
        "start: trace - bench ms", "end: trace - bench ms",
    ):  # fmt: skip
        table.add_column(name, justify="left" if name in ("scenario", "topology") else "right")
    for row in traced:
        jaeger, bench = row["jaeger"], row["latency_ms"] or {}
        missing = f" [red]({jaeger['incomplete']} incomplete)[/red]" if jaeger["incomplete"] else ""
        table.add_row(
            row["scenario"],
            row["engine"],
            f"{jaeger['traces']:,}{missing}",
            " / ".join(
                f"{r['longest_trace_ms']:,.0f}" for r in row["runs"] if "longest_trace_ms" in r
            ),
            f"{jaeger['sell_out_s']:.3f} / {row['runtime_s']:.3f}",
            _percentiles(jaeger["latency_ms"]),
            _percentiles(bench),
            _gap(jaeger["start_gap_ms"]),
            _gap(jaeger["end_gap_ms"]),
        )
    console.print()
    console.print(table)
    console.print(
        "trace length: the producer's send span start -> the last span's end, as Jaeger "
        "returned them (ns); bench: the record timestamp (whole ms) -> the outcome written "
        "in the database, before its commit. start / end: per request, the trace's minus "
        "the bench's, median (p99, min..max): the start agrees within the timestamp's 1 ms; "
        "the trace ends after the commit, the reply and the handler's return.",
        style="dim",
    )
    for row in traced:
        longest = row["jaeger"]["longest"]
        console.print(
            f"[bold]Longest trace[/bold] of {row['scenario']} {row['engine']} "
            f"({longest['request']}, trace {longest['trace_id']}, {longest['ms']:,.1f} ms):",
            highlight=False,
        )
        for line in render(longest["spans"]):
            console.print(f"  {line}", highlight=False, soft_wrap=True, markup=False)


def _gap(spread: dict[str, float] | None) -> str:
    if not spread:
        return "-"
    return (
        f"{spread['median']:+.1f} (p99 {spread['p99']:+.1f}, "
        f"{spread['min']:+.1f}..{spread['max']:+.1f})"
    )


def _percentiles(latency: dict[str, float]) -> str:
    if not latency:
        return "-"
    return " / ".join(f"{latency[k]:,.1f}" for k in ("p50", "p95", "p99"))
