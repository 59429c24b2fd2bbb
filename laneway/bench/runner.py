"""One ``laneway bench`` invocation: plan, run every spec, report, write JSON, plots, profiles."""

from __future__ import annotations

import contextlib
import sys
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from laneway.bench import ceilings
from laneway.bench.ceilings import Ceiling
from laneway.bench.echo import EchoServer
from laneway.bench.harness import OK, Harness, Measurement
from laneway.bench.instrumentation import cost_lines
from laneway.bench.report import print_report, recommendations
from laneway.bench.results import (
    Row,
    attach_ceilings,
    document,
    is_valid,
    measure_row,
    merge_rows,
    write_json,
)
from laneway.bench.scenarios import SCENARIOS, Overrides, RunSpec, Variant, plan
from laneway.bench.targets import EmbeddedTarget, KafkaTarget, Target
from laneway.engines.event_loops import resolve
from laneway.options import EventLoop

if TYPE_CHECKING:
    from laneway.bench.load_bench import LoadOptions

WIDE = 240
"""Table width when stdout is not a terminal (files, pipes, tests): never squash columns."""


@dataclass(frozen=True)
class BenchOptions:
    """The parsed command line of ``laneway bench``."""

    scenarios: tuple[str, ...]
    engines: tuple[str, ...]
    event_loop: EventLoop
    ceilings: bool
    overrides: Overrides
    repeat: int
    timeout: float
    bootstrap_servers: str | None
    topic_prefix: str
    json_path: Path | None
    plot_dir: Path | None
    profile_dir: Path | None
    instruments: tuple[str, ...] = ()
    load: LoadOptions | None = None
    """The spike and paced scenarios' choices, when any of them is asked for."""


def stdout_console() -> Console:
    console = Console()
    return console if console.is_terminal else Console(width=WIDE)


def run_bench(options: BenchOptions) -> bool:
    """Run the whole benchmark and print it; True when every row is valid."""
    started_at = datetime.now(timezone.utc).isoformat(timespec="seconds")
    console = stdout_console()
    rows: list[Row] = []
    advice: list[dict[str, Any]] = []
    target: Target | None = None
    if any(name in SCENARIOS for name in options.scenarios):
        target, rows, advice = _run_engines(options, console)
    if options.load is not None:
        from laneway.bench.load_bench import run_load_bench
        from laneway.bench.load_report import print_load_report

        err = Console(stderr=True)
        loaded = run_load_bench(options.load, lambda text: err.print(text, highlight=False))
        print_load_report(console, loaded, "laneway bench: reservations on Kafka and PostgreSQL")
        rows += loaded
    settings = _settings(options, target, started_at)
    _write_outputs(console, options, settings, rows, advice)
    return all(is_valid(r) for r in rows)


def _run_engines(
    options: BenchOptions, console: Console
) -> tuple[Target, list[Row], list[dict[str, Any]]]:
    """The engine scenarios: every planned run, the report; the target, rows and advice."""
    err = Console(stderr=True)
    target: Target
    if options.bootstrap_servers:
        kafka = KafkaTarget(options.bootstrap_servers, options.topic_prefix)
        kafka.check()
        target = kafka
    else:
        target = EmbeddedTarget()
    names = [name for name in options.scenarios if name in SCENARIOS]
    runs = plan(names, options.engines, options.overrides, options.repeat, options.instruments)
    rows: list[Row] = []
    needs_echo = "io" in options.scenarios and any(s.engine != "raw" for s in runs)
    with contextlib.ExitStack() as stack:
        echo_port = stack.enter_context(EchoServer()).port if needs_echo else 0
        progress = stack.enter_context(
            Progress(
                TextColumn("{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TimeElapsedColumn(),
                console=err,
                transient=True,
                refresh_per_second=4,
            )
        )
        harness = Harness(
            target, progress, options.timeout, options.profile_dir, echo_port, options.event_loop
        )
        overall = progress.add_task(f"laneway bench ({target.kind})", total=len(runs))
        measured: dict[tuple[str, str], list[list[Ceiling]]] = {}
        timed: tuple[str, Variant, int] | None = None  # the repetition whose work was timed
        for spec in runs:
            repetition = (spec.scenario.name, spec.variant, spec.repeat)
            if options.ceilings and repetition != timed:  # runs come grouped by repetition
                timed = repetition
                found = ceilings.measure(
                    spec.scenario, spec.variant, options.engines, options.event_loop
                )
                if found:
                    measured.setdefault(_variant_key(spec), []).append(found)
                    progress.console.print(_ceiling_line(spec, found), highlight=False)
            measurement = harness.run(spec)
            row = measure_row(measurement, target.kind)
            rows.append(row)
            progress.advance(overall)
            progress.console.print(_one_line(measurement, row), highlight=False, soft_wrap=True)
            del measurement  # its records must not weigh on the next run's garbage collector
    merged = merge_rows(rows)
    limits = {key: ceilings.merge(found) for key, found in measured.items()}
    attach_ceilings(merged, limits)
    advice = recommendations(merged)
    title = f"laneway bench on the {target.kind} log"
    if isinstance(target, KafkaTarget):
        title += f" at {target.bootstrap_servers}"
    loop_name = resolve(options.event_loop).value
    if "async" in options.engines:
        title += f"; async engine on {loop_name}"
    print_report(console, merged, title, advice, limits, loop_name)
    costs = cost_lines(merged)
    if costs:
        console.print()
        console.print("[bold]Instrumentation[/bold] (throughput with it on / off, same run)")
        for line in costs:
            console.print(f"  {line}", highlight=False)
    return target, merged, advice


def _variant_key(spec: RunSpec) -> tuple[str, str]:
    return spec.scenario.name, spec.variant.label


def _ceiling_line(spec: RunSpec, found: list[Ceiling]) -> str:
    head = f"{spec.scenario.name} {spec.variant.label} work alone"
    distinct = dict.fromkeys(f"{c.how} {c.tps:,.0f} msg/s" for c in found)  # cpu: 1 process x3
    return head + ": " + ", ".join(distinct)


def _one_line(m: Measurement, row: Row) -> str:
    spec = m.spec
    head = f"{spec.scenario.name} {spec.variant.label} {spec.label}"
    if m.status != OK:
        return f"[red]{head}: {m.status}[/red] {m.error or ''}"
    return (
        f"{head}: {row['tps']:,.0f} msg/s in {row['runtime_s']:.2f} s, "
        f"order {row['ordering_check']}, lost {row['lost']}, dup {row['duplicates']}"
    )


def _write_outputs(
    console: Console,
    options: BenchOptions,
    settings: dict[str, Any],
    rows: list[Row],
    advice: list[dict[str, Any]],
) -> None:
    if options.profile_dir is not None:
        console.print(
            f"\n[bold]Profiles[/bold] (pyinstrument, control thread) in {options.profile_dir}:"
        )
        for row in rows:
            names = ", ".join(Path(p).name for p in row["profiles"])
            console.print(
                f"  {row['scenario']} {row['variant']} {row['engine']}: {names}", highlight=False
            )
    if options.json_path is not None:
        write_json(options.json_path, document(rows, settings, advice))
        console.print(f"\nwrote {options.json_path}", highlight=False)
    if options.plot_dir is not None:
        from laneway.bench.plots import write_plots  # matplotlib: imported only when asked

        written = write_plots(rows, options.plot_dir)
        names = ", ".join(p.name for p in written)
        console.print(
            f"wrote {len(written)} charts to {options.plot_dir}: {names}", highlight=False
        )


def _settings(options: BenchOptions, target: Target | None, started_at: str) -> dict[str, Any]:
    load = options.load
    return {
        "target": None if target is None else target.describe(),
        "load": None if load is None else _load_settings(load),
        "scenarios": list(options.scenarios),
        "engines": list(options.engines),
        "event_loop": resolve(options.event_loop).value,
        "repeat": options.repeat,
        "timeout_s": options.timeout,
        "profile": options.profile_dir is not None,
        "ceilings": options.ceilings,
        "overrides": asdict(options.overrides),
        "started_at": started_at,
        "argv": list(sys.argv),
    }


def _load_settings(load: LoadOptions) -> dict[str, Any]:
    """The load benchmarks' choices for the JSON document (no DSN: it may hold secrets)."""
    return {
        "scenarios": list(load.scenarios),
        "topologies": [t.name for t in load.topologies],
        "requests": load.requests,
        "rate": load.rate,
        "duration_s": load.duration,
        "partitions": load.partitions,
        "pool": load.pool,
        "statement_timeout_s": load.statement_timeout,
        "slow_ms": load.slow_ms,
        "traces": None if load.trace_dir is None else str(load.trace_dir),
    }
