"""The ``laneway bench`` click commands (add to the CLI with ``main.add_command(bench)``).

Only click and laneway's core are imported here; the ``bench`` extra's heavy modules (rich,
hdrh, matplotlib, pyinstrument, psutil) are imported when a benchmark actually runs, with a
clear message when they are missing.
"""

from __future__ import annotations

import importlib.util
import re
from collections.abc import Callable
from pathlib import Path

import click

from laneway.bench.pipelines import BATCH, DEFAULT_BATCH_SIZE, EXACTLY_ONCE, RESULTS
from laneway.bench.scenarios import (
    ALL_SCENARIOS,
    DEFAULT_TOPIC_PREFIX,
    ENGINES,
    LOAD_PARTITIONS,
    LOAD_POOL,
    LOAD_SCENARIOS,
    ORDERINGS,
    PACED_DURATION,
    PACED_RATE,
    SCENARIOS,
    SPIKE_REQUESTS,
    Overrides,
)
from laneway.bench.topologies import DEFAULT_TOPOLOGIES, Topology, parse_topology
from laneway.options import EventLoop, uvloop_installed

EXTRAS = ("rich", "hdrh", "matplotlib", "pyinstrument", "psutil")
POSTGRES_EXTRAS = ("asyncpg", "psycopg", "psycopg_pool")
"""What the spike and paced scenarios need besides the bench extra (``laneway[postgres]``)."""


def _missing_extra(error: ModuleNotFoundError) -> click.ClickException:
    """The ClickException for a missing ``bench`` (or ``postgres``) extra; re-raise
    anything else."""
    package = (error.name or "").split(".")[0]
    if package in POSTGRES_EXTRAS:
        return click.ClickException(
            f"the spike and paced scenarios need {error.name!r}: pip install 'laneway[postgres]'"
        )
    if package not in EXTRAS:
        raise error
    return click.ClickException(
        f"laneway bench needs the optional dependency {error.name!r}: pip install 'laneway[bench]'"
    )


def _topologies(ctx: click.Context, param: click.Parameter, value: str) -> tuple[Topology, ...]:
    try:
        chosen = tuple(parse_topology(v) for v in value.split(",") if v.strip())
    except ValueError as error:
        raise click.BadParameter(str(error)) from error
    if not chosen:
        raise click.BadParameter("name at least one topology, e.g. 'async c64'")
    return chosen


def _names(
    allowed: tuple[str, ...],
) -> Callable[[click.Context, click.Parameter, str], tuple[str, ...]]:
    def parse(ctx: click.Context, param: click.Parameter, value: str) -> tuple[str, ...]:
        chosen = tuple(dict.fromkeys(v.strip() for v in value.split(",") if v.strip()))
        unknown = [v for v in chosen if v not in allowed]
        if unknown or not chosen:
            raise click.BadParameter(
                f"{','.join(unknown) or repr(value)} is not allowed; choose from "
                f"{', '.join(allowed)} (comma-separated)"
            )
        return chosen

    return parse


def _counts(
    ctx: click.Context, param: click.Parameter, value: str | None
) -> tuple[int, ...] | None:
    if value is None:
        return None
    try:
        counts = tuple(int(v) for v in value.split(",") if v.strip())
    except ValueError:
        counts = ()
    if not counts or any(c < 1 or c > 1_000_000 for c in counts):
        raise click.BadParameter(
            f"{value!r} is not valid; expected whole numbers from 1 to 1,000,000, "
            "comma-separated (e.g. 1,10,100)"
        )
    return counts


_NEEDS = {
    "metrics": ("prometheus_client", "laneway[metrics]"),
    "otel-metrics": ("opentelemetry.sdk", "opentelemetry-sdk"),
    "tracing": ("opentelemetry.sdk", "opentelemetry-sdk"),
}
"""What each instrument imports, and what to install for it."""


def _instruments(metrics: str | None, tracing: bool) -> tuple[str, ...]:
    chosen = {None: (), "prometheus": ("metrics",), "otel": ("otel-metrics",)}[metrics]
    chosen += ("tracing",) if tracing else ()
    for name in chosen:
        module, extra = _NEEDS[name]
        if importlib.util.find_spec(module.split(".")[0]) is None or (
            "." in module and importlib.util.find_spec(module) is None
        ):
            flag = "tracing" if name == "tracing" else "metrics"
            raise click.UsageError(f"--{flag} needs {module}: pip install '{extra}'")
    return chosen


def _pipelines(batch_size: int | None, results: bool) -> tuple[str, ...]:
    chosen = (BATCH,) if batch_size is not None else ()
    return chosen + ((RESULTS, EXACTLY_ONCE) if results else ())


def _topic_prefix(ctx: click.Context, param: click.Parameter, value: str) -> str:
    if not re.fullmatch(r"[A-Za-z0-9._-]{1,200}", value):
        raise click.BadParameter(
            f"{value!r} is not valid; use 1-200 ASCII letters, digits, '.', '_' or '-'"
        )
    return value


def _orderings(
    ctx: click.Context, param: click.Parameter, value: str | None
) -> tuple[str, ...] | None:
    return None if value is None else _names(ORDERINGS)(ctx, param, value)


@click.group(invoke_without_command=True)
@click.option(
    "--scenarios",
    default=",".join(SCENARIOS),
    show_default=True,
    callback=_names(ALL_SCENARIOS),
    help="Comma-separated scenarios to run (members' member processes need Kafka). Run "
    "only when named: share (a Kafka share group vs a classic group, and the share source vs "
    "a bare ShareConsumer loop; needs a Kafka >= 4.2 broker with share.version=1), spike and "
    "paced (open-loop reservations on Kafka and PostgreSQL, compared by --topologies).",
)
@click.option(
    "--engines",
    default=",".join(ENGINES),
    show_default=True,
    callback=_names(ENGINES),
    help="Comma-separated engines: raw (plain consume loop, the ceiling), baseline "
    "(laneway's sync engine), thread, async, process.",
)
@click.option(
    "--messages",
    type=click.IntRange(min=1),
    help="Messages per run (default: per scenario; spike: requests produced at once).",
)
@click.option(
    "--partitions", callback=_counts, help="Partition counts, comma-separated (one run each)."
)
@click.option("--keys", callback=_counts, help="Key counts, comma-separated (one run each).")
@click.option(
    "--ordering",
    callback=_orderings,
    help="Ordering modes, comma-separated: key, partition, unordered (one run each).",
)
@click.option(
    "--work-ms",
    type=click.FloatRange(min=0, max=10_000),
    help="Milliseconds of work per message for sleep, io, scaling (busy CPU) and keys "
    "(upper bound of the random wait).",
)
@click.option(
    "--cpu-iterations", type=click.IntRange(min=1), help="sha256 rounds per message (cpu)."
)
@click.option(
    "--concurrency",
    type=click.IntRange(min=1, max=100_000),
    help="Threads / coroutines for the thread and async engines [default: 128]; the process "
    "engine always runs one worker per core.",
)
@click.option(
    "--event-loop",
    type=click.Choice(["auto", "asyncio", "uvloop"]),
    default="auto",
    show_default=True,
    help="The async engine's event loop (auto: uvloop when installed).",
)
@click.option(
    "--ceilings/--no-ceilings",
    default=True,
    show_default=True,
    help="Also time the bare work of the sleep and cpu scenarios without laneway (threads, "
    "coroutines, 1 and N processes), so each engine is shown against what the machine "
    "allows in the same run.",
)
@click.option(
    "--repeat",
    default=1,
    show_default=True,
    type=click.IntRange(min=1, max=100),
    help="Runs per row; the median is reported.",
)
@click.option(
    "--timeout",
    default=600.0,
    show_default=True,
    type=click.FloatRange(min=0, min_open=True),
    help="Seconds one run may take before it is stopped and marked TIMEOUT.",
)
@click.option(
    "--bootstrap-servers",
    metavar="HOST:PORT",
    help="Run against this Kafka broker instead of the embedded log.",
)
@click.option(
    "--metrics",
    type=click.Choice(["prometheus", "otel"]),
    is_flag=False,
    flag_value="prometheus",
    default=None,
    help="Run each laneway engine again with a metrics backend and print the throughput "
    "ratio, measured side by side: prometheus (the default when no value is given; needs "
    "laneway[metrics]) or otel (the OpenTelemetry SDK with an in-memory reader).",
)
@click.option(
    "--tracing",
    is_flag=True,
    help="Run each in-process engine again with the OpenTelemetry SDK tracing every attempt "
    "(spans dropped by the exporter; needs opentelemetry-sdk) and print the ratio.",
)
@click.option(
    "--batch-size",
    type=click.IntRange(min=1, max=100_000),
    help="Run each laneway engine again with a batch handler of this many messages "
    "(sleep/io/random work done once per batch, as a bulk call) and print the ratio.",
)
@click.option(
    "--results",
    is_flag=True,
    help="Run each laneway engine again returning one laneway.Produce per message into "
    "<topic>.out, at-least-once and with exactly_once=True (commit_interval 0.1 s), and "
    "print each against consume-only (the plain row).",
)
@click.option(
    "--topic-prefix",
    default=DEFAULT_TOPIC_PREFIX,
    show_default=True,
    callback=_topic_prefix,
    help="Start of the names of the topics and groups created on a Kafka broker (each run "
    "creates and deletes its own), e.g. to keep them apart on a shared broker.",
)
@click.option(
    "--topologies",
    default=",".join(DEFAULT_TOPOLOGIES),
    show_default=True,
    callback=_topologies,
    help="spike and paced: the consumer topologies compared, comma-separated, each "
    "[Nx ]ENGINE[ cC][ adaptive][ maxR]: N member processes, engine sync/thread/async, "
    "concurrency C, an adaptive concurrency limit, max_rate R per process.",
)
@click.option(
    "--postgres-dsn",
    metavar="DSN",
    help="spike and paced: the PostgreSQL database (default: from a checkout, the server of "
    "scripts/postgres, started and stopped again when not running). Its tables seats, "
    "outcomes and slowdown are replaced.",
)
@click.option(
    "--rate",
    default=PACED_RATE,
    show_default=True,
    type=click.FloatRange(min=0, min_open=True),
    help="paced: requests produced per second.",
)
@click.option(
    "--duration",
    default=PACED_DURATION,
    show_default=True,
    type=click.FloatRange(min=0, min_open=True),
    help="paced: seconds of producing.",
)
@click.option(
    "--pool",
    default=LOAD_POOL,
    show_default=True,
    type=click.IntRange(min=1, max=1_000),
    help="spike and paced: most database connections per consumer process (each process "
    "opens min(concurrency, this)).",
)
@click.option(
    "--statement-timeout",
    type=click.FloatRange(min=0, min_open=True),
    help="spike and paced: the database's statement_timeout in seconds on the consumers' "
    "connections (default: none); a timed-out reservation fails and is retried.",
)
@click.option(
    "--slow-db",
    "slow_ms",
    default=0.0,
    type=click.FloatRange(min=0),
    help="paced: from a third to two thirds of the run, every reservation holds one lock for "
    "this many milliseconds (the database then manages 1000 / MS a second).",
)
@click.option(
    "--traces",
    "trace_dir",
    type=click.Path(file_okay=False, path_type=Path),
    help="spike and paced: write OpenTelemetry spans of the producer and the consumers to "
    "this directory (needs opentelemetry-sdk) and print the slowest request's trace. Tracing "
    "costs CPU: measure with it off.",
)
@click.option(
    "--json",
    "json_path",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Write every figure and the machine description to this JSON file.",
)
@click.option(
    "--plot",
    "plot_dir",
    type=click.Path(file_okay=False, path_type=Path),
    help="Write PNG charts (throughput, scaling, latency CDF) to this directory.",
)
@click.option(
    "--profile",
    "profile_dir",
    type=click.Path(file_okay=False, path_type=Path),
    help="Profile each run with pyinstrument; write HTML and text files here.",
)
@click.pass_context
def bench(
    ctx: click.Context,
    scenarios: tuple[str, ...],
    engines: tuple[str, ...],
    messages: int | None,
    partitions: tuple[int, ...] | None,
    keys: tuple[int, ...] | None,
    ordering: tuple[str, ...] | None,
    work_ms: float | None,
    cpu_iterations: int | None,
    concurrency: int | None,
    event_loop: str,
    ceilings: bool,
    repeat: int,
    timeout: float,
    bootstrap_servers: str | None,
    metrics: str | None,
    tracing: bool,
    batch_size: int | None,
    results: bool,
    topic_prefix: str,
    json_path: Path | None,
    plot_dir: Path | None,
    profile_dir: Path | None,
    topologies: tuple[Topology, ...],
    postgres_dsn: str | None,
    rate: float,
    duration: float,
    pool: int,
    statement_timeout: float | None,
    slow_ms: float,
    trace_dir: Path | None,
) -> None:
    """Measure which engine fits which workload, with numbers.

    Each scenario's backlog is produced into a fresh topic, then consumed by every chosen
    engine; one table shows throughput, latency, start-up and correctness (order, lost,
    duplicates), followed by a recommendation per scenario. Runs on the embedded log
    unless --bootstrap-servers is given. Exits 1 when a run failed, timed out, lost or
    duplicated a message, or broke the order.

    spike and paced run reservation requests through Kafka into PostgreSQL, each topology
    in turn (laneway run processes), and compare sell-out time, latency percentiles, CPU
    seconds and memory; without --bootstrap-servers / --postgres-dsn, from a checkout,
    they start scripts/kafka / scripts/postgres themselves.
    """
    if ctx.invoked_subcommand is not None:
        return
    loads = tuple(s for s in scenarios if s in LOAD_SCENARIOS)
    try:
        from laneway.bench.runner import BenchOptions, run_bench
        from laneway.bench.targets import BenchSetupError

        if loads:
            from laneway.bench.load_bench import LoadOptions
    except ModuleNotFoundError as error:
        raise _missing_extra(error) from error
    if loads and partitions is not None and len(partitions) > 1:
        raise click.BadParameter(
            "spike and paced take one partition count", param_hint="--partitions"
        )
    if loads and trace_dir is not None:
        _instruments(None, True)  # --traces needs the OpenTelemetry SDK, as --tracing does
    overrides = Overrides(
        messages=messages,
        partitions=partitions,
        keys=keys,
        orderings=ordering,
        work_ms=work_ms,
        cpu_iterations=cpu_iterations,
        concurrency=concurrency,
    )
    if event_loop == "uvloop" and not uvloop_installed():
        raise click.BadParameter(
            "uvloop is not installed: pip install 'laneway[uvloop]'", param_hint="--event-loop"
        )
    options = BenchOptions(
        scenarios=scenarios,
        engines=engines,
        event_loop=EventLoop(event_loop),
        ceilings=ceilings,
        overrides=overrides,
        repeat=repeat,
        timeout=timeout,
        bootstrap_servers=bootstrap_servers,
        topic_prefix=topic_prefix,
        instruments=_instruments(metrics, tracing) + _pipelines(batch_size, results),
        batch_size=batch_size or DEFAULT_BATCH_SIZE,
        json_path=json_path,
        plot_dir=plot_dir,
        profile_dir=profile_dir,
        load=None
        if not loads
        else LoadOptions(
            scenarios=loads,
            topologies=topologies,
            requests=messages or SPIKE_REQUESTS,
            rate=rate,
            duration=duration,
            partitions=partitions[0] if partitions else LOAD_PARTITIONS,
            pool=pool,
            statement_timeout=statement_timeout,
            slow_ms=slow_ms,
            bootstrap=bootstrap_servers,
            dsn=postgres_dsn,
            topic_prefix=topic_prefix,
            trace_dir=trace_dir,
            repeat=repeat,
            timeout=timeout,
        ),
    )
    try:
        all_valid = run_bench(options)
    except BenchSetupError as error:
        raise click.ClickException(str(error)) from error
    if not all_valid:
        ctx.exit(1)


@bench.command()
@click.argument("a", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.argument("b", type=click.Path(exists=True, dir_okay=False, path_type=Path))
def compare(a: Path, b: Path) -> None:
    """Print B's throughput relative to A's for every (scenario, variant, engine)."""
    try:
        from laneway.bench.compare import print_comparison
        from laneway.bench.runner import stdout_console
    except ModuleNotFoundError as error:
        raise _missing_extra(error) from error
    try:
        print_comparison(stdout_console(), a, b)
    except ValueError as error:
        raise click.ClickException(str(error)) from error


@bench.command()
@click.option(
    "--engines",
    default="sync,async",
    show_default=True,
    callback=_names(("sync", "thread", "async", "process")),
    help="Engines whose produce -> handler-start latency is measured.",
)
@click.option(
    "--rate",
    default=2_000.0,
    show_default=True,
    type=click.FloatRange(min=1, max=1_000_000),
    help="Messages per second produced.",
)
@click.option(
    "--seconds",
    default=5.0,
    show_default=True,
    type=click.FloatRange(min=0.1, max=600),
    help="How long each run produces.",
)
@click.option(
    "--capacity",
    default=256,
    show_default=True,
    type=click.IntRange(min=1),
    help="Records per partition of the bounded log in the blocking run.",
)
@click.option(
    "--slow-ms",
    default=1.0,
    show_default=True,
    type=click.FloatRange(min=0),
    help="The slow consumer's wait per message in the blocking run.",
)
@click.option(
    "--json",
    "json_path",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Write the figures to this JSON file.",
)
def bus(
    engines: tuple[str, ...],
    rate: float,
    seconds: float,
    capacity: int,
    slow_ms: float,
    json_path: Path | None,
) -> None:
    """The embedded log as an in-process bus: produce -> handler-start latency in
    microseconds at a steady rate, and how long producers block with when_full="block"
    under a slow consumer (see laneway/bench/bus.py)."""
    try:
        from laneway.bench import bus as bus_bench
        from laneway.bench.results import machine, write_json
        from laneway.bench.runner import stdout_console
    except ModuleNotFoundError as error:
        raise _missing_extra(error) from error
    result = bus_bench.measure(engines, rate, seconds, capacity, slow_ms, rate)
    bus_bench.print_report(stdout_console(), result)
    if json_path is not None:
        write_json(json_path, {"machine": machine(), **result})
        click.echo(f"wrote {json_path}")


@bench.command("byte-bound")
@click.option(
    "--bootstrap-servers",
    metavar="HOST:PORT",
    required=True,
    help="The Kafka broker (it must have disk for messages x size).",
)
@click.option("--messages", default=1_000_000, show_default=True, type=click.IntRange(min=1))
@click.option(
    "--size", default=10_000, show_default=True, type=click.IntRange(min=1), help="Bytes per value."
)
@click.option(
    "--max-buffered-bytes",
    default=64 * 1024 * 1024,
    show_default=True,
    type=click.IntRange(min=1024),
    help="The consumer's bound.",
)
@click.option(
    "--json",
    "json_path",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Write the figures to this JSON file.",
)
def byte_bound(
    bootstrap_servers: str,
    messages: int,
    size: int,
    max_buffered_bytes: int,
    json_path: Path | None,
) -> None:
    """Peak RSS of a consumer over a backlog far larger than memory (default 10 GB) with
    max_buffered_bytes, against the bound plus the process's constant (see
    laneway/bench/byte_bound.py). Exits 1 when the peak exceeds it."""
    try:
        from laneway.bench import byte_bound as bound_bench
        from laneway.bench.results import machine, write_json
    except ModuleNotFoundError as error:
        raise _missing_extra(error) from error
    result = bound_bench.measure(
        bootstrap_servers, messages, size, max_buffered_bytes, say=click.echo
    )
    for line in bound_bench.report_lines(result):
        click.echo(line)
    if json_path is not None:
        write_json(json_path, {"machine": machine(), **bound_bench.as_json(result)})
        click.echo(f"wrote {json_path}")
    if not result.within:
        raise SystemExit(1)
