"""One ``laneway bench`` invocation: plan, run every spec, report, write JSON, plots, profiles."""

from __future__ import annotations

import contextlib
import sys
from dataclasses import asdict, dataclass, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from laneway.bench.engines import ceilings
from laneway.bench.engines.ceilings import Ceiling
from laneway.bench.engines.echo import EchoServer
from laneway.bench.engines.harness import OK, Harness, Measurement
from laneway.bench.engines.instrumentation import cost_lines
from laneway.bench.engines.pipelines import DEFAULT_BATCH_SIZE
from laneway.bench.engines.scenarios import (
    CLIENT_LOOPS,
    MEMBERS,
    SCENARIOS,
    SHARE_SCENARIO,
    SKEW_SCENARIO,
    Overrides,
    RunSpec,
    Variant,
    plan,
)
from laneway.bench.engines.targets import BenchSetupError, EmbeddedTarget, KafkaTarget, Target
from laneway.bench.members import scenario as members
from laneway.bench.reporting.rows import (
    Row,
    attach_ceilings,
    document,
    is_valid,
    machine_line,
    measure_row,
    merge_rows,
    write_json,
)
from laneway.bench.reporting.table import print_report, recommendations
from laneway.bench.share.scenario import ShareBench, ShareBenchSettings
from laneway.engines.event_loops import resolve
from laneway.options import EventLoop

if TYPE_CHECKING:
    from laneway.bench.load.bench import LoadOptions

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
    batch_size: int = DEFAULT_BATCH_SIZE
    value_format: str = "bytes"
    """What the records carry and handlers get (see :mod:`laneway.bench.engines.value_formats`)."""
    load: LoadOptions | None = None
    """The spike and paced scenarios' choices, when any of them is asked for."""


def stdout_console() -> Console:
    console = Console()
    return console if console.is_terminal else Console(width=WIDE)


def run_bench(options: BenchOptions) -> bool:
    """Run the whole benchmark and print it; True when every row is valid."""
    started_at = datetime.now(timezone.utc).isoformat(timespec="seconds")
    console = stdout_console()
    err = Console(stderr=True)
    console.print(machine_line(), highlight=False, soft_wrap=True)
    engine_scenarios = [name for name in options.scenarios if name in SCENARIOS]
    share = SHARE_SCENARIO in options.scenarios
    skew = SKEW_SCENARIO in options.scenarios
    target: Target | None = None
    if any(name != MEMBERS for name in engine_scenarios) or share or skew:
        target = _target(options)
    if share and not isinstance(target, KafkaTarget):
        raise BenchSetupError(
            "the share scenario needs a Kafka broker (>= 4.2, share.version=1): give "
            "--bootstrap-servers HOST:PORT"
        )
    rows: list[Row] = []
    advice: list[dict[str, Any]] = []
    if target is not None and any(name != MEMBERS for name in engine_scenarios):
        rows, advice = _run_engines(options, target, engine_scenarios, console, err)
    shared: dict[str, Any] | None = None
    if share:
        assert isinstance(target, KafkaTarget)
        shared = ShareBench(target, _share_settings(options.overrides), console).run()
    skewed: dict[str, Any] | None = None
    if skew:
        assert target is not None
        from laneway.bench.skew.scenario import run_skew

        skewed = run_skew(target, console)
    members_report = None
    if MEMBERS in options.scenarios:
        members_report = _run_members(options, console, err)
    if options.load is not None:
        from laneway.bench.load.bench import run_load_bench
        from laneway.bench.load.report import print_load_report

        loaded = run_load_bench(options.load, lambda text: err.print(text, highlight=False))
        print_load_report(console, loaded, "laneway bench: reservations on Kafka and PostgreSQL")
        rows += loaded
    settings = _settings(options, target, started_at)
    _write_outputs(console, options, settings, rows, advice, members_report, shared, skewed)
    members_ok = members_report is None or members.is_valid(members_report)
    shared_ok = shared is None or bool(shared["valid"])
    skew_ok = skewed is None or bool(skewed["valid"])
    return all(is_valid(r) for r in rows) and members_ok and shared_ok and skew_ok


def _target(options: BenchOptions) -> Target:
    """The log the engine and share scenarios run on: Kafka when given, else embedded."""
    if options.bootstrap_servers:
        kafka = KafkaTarget(options.bootstrap_servers, options.topic_prefix, options.value_format)
        kafka.check()
        return kafka
    return EmbeddedTarget(options.value_format)


def _run_engines(
    options: BenchOptions, target: Target, names: list[str], console: Console, err: Console
) -> tuple[list[Row], list[dict[str, Any]]]:
    """The engine scenarios ``names``: every planned run, the report; the rows and advice."""
    runs = plan(names, options.engines, options.overrides, options.repeat, options.instruments)
    rows: list[Row] = []
    needs_echo = "io" in names and any(s.engine not in CLIENT_LOOPS for s in runs)
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
            target,
            progress,
            options.timeout,
            options.profile_dir,
            echo_port,
            options.event_loop,
            options.batch_size,
            options.value_format,
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
    if options.value_format != "bytes":
        title += f", {options.value_format} values decoded"
    if isinstance(target, KafkaTarget):
        title += f" at {target.bootstrap_servers}"
    loop_name = resolve(options.event_loop).value
    if "async" in options.engines:
        title += f"; async engine on {loop_name}"
    print_report(console, merged, title, advice, limits, loop_name)
    costs = cost_lines(merged)
    if costs:
        console.print()
        console.print(
            "[bold]Twins[/bold] (throughput with instrumentation on / off, as batches, with "
            "results; each against its plain row of the same run, with --repeat the median of "
            "the per-repetition ratios)"
        )
        for line in costs:
            console.print(f"  {line}", highlight=False)
    return merged, advice


def _run_members(options: BenchOptions, console: Console, err: Console) -> members.MembersReport:
    scenario = options.overrides.apply(SCENARIOS[MEMBERS])
    report = members.measure(
        options.bootstrap_servers,
        options.topic_prefix,
        messages=scenario.messages,
        work_ms=scenario.work_ms,
        say=lambda line: err.print(line, highlight=False),
    )
    console.print()
    members.print_report(console, report)
    return report


def _share_settings(overrides: Overrides) -> ShareBenchSettings:
    """The share scenario's settings, with ``--messages`` (for the members runs and the
    trivial loops alike, as for every scenario) and ``--work-ms`` applied."""
    defaults = ShareBenchSettings()
    work_ms = overrides.single_work_ms
    return replace(
        defaults,
        messages=overrides.messages or defaults.messages,
        trivial_messages=overrides.messages or defaults.trivial_messages,
        work_ms=defaults.work_ms if work_ms is None else work_ms,
    )


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
    members_report: members.MembersReport | None = None,
    shared: dict[str, Any] | None = None,
    skewed: dict[str, Any] | None = None,
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
        doc = document(rows, settings, advice)
        if members_report is not None:
            doc["members"] = members_report.as_json()
        if shared is not None:
            doc["share"] = shared
        if skewed is not None:
            doc["skew"] = skewed
        write_json(options.json_path, doc)
        console.print(f"\nwrote {options.json_path}", highlight=False)
    if options.plot_dir is not None:
        from laneway.bench.reporting.plots import (
            write_plots,  # matplotlib: imported only when asked
        )

        written = write_plots(rows, options.plot_dir)
        if members_report is not None:
            written.append(members.plot(members_report, options.plot_dir))
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
        "twins": list(options.instruments),
        "batch_size": options.batch_size,
        "value_format": options.value_format,
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
