"""The ``laneway bench`` click commands (add to the CLI with ``main.add_command(bench)``).

Only click and laneway's core are imported here; the ``bench`` extra's heavy modules (rich,
hdrh, matplotlib, pyinstrument, psutil) are imported when a benchmark actually runs, with a
clear message when they are missing.
"""

from __future__ import annotations

from pathlib import Path

import click

from laneway.bench.engines.pipelines import DEFAULT_BATCH_SIZE
from laneway.bench.engines.scenarios import (
    ALL_SCENARIOS,
    DEFAULT_TOPIC_PREFIX,
    ENGINES,
    LOAD_PARTITIONS,
    LOAD_POOL,
    LOAD_SCENARIOS,
    MEMBERS,
    PACED_DURATION,
    PACED_RATE,
    SCENARIOS,
    SHARE_SCENARIO,
    SPIKE_REQUESTS,
    Overrides,
)
from laneway.bench.load.topologies import DEFAULT_TOPOLOGIES, Topology
from laneway.bench.option_parsing import (
    count_list,
    http_url,
    instruments_for,
    jaeger_url,
    key_list,
    missing_extra,
    name_list,
    ordering_list,
    pipelines_for,
    topic_prefix_of,
    topology_list,
    tracing_backend,
    work_grid,
)
from laneway.bench.tools import bus, byte_bound, compare
from laneway.options import EventLoop, uvloop_installed


@click.group(invoke_without_command=True)
@click.option(
    "--scenarios",
    default=",".join(SCENARIOS),
    show_default=True,
    callback=name_list(ALL_SCENARIOS),
    help="Comma-separated scenarios to run (members' member processes need Kafka). Run "
    "only when named: share (a Kafka share group vs a classic group, and the share source vs "
    "a bare ShareConsumer loop; needs a Kafka >= 4.2 broker with share.version=1), skew "
    "(Zipf hot keys with and without max_buffered_per_key, and a quiet tenant beside a "
    "flooding one with and without fairness), spike and paced (open-loop reservations on "
    "Kafka and PostgreSQL, compared by --topologies).",
)
@click.option(
    "--engines",
    default=",".join(ENGINES),
    show_default=True,
    callback=name_list(ENGINES),
    help="Comma-separated engines: ceiling (a client loop that only counts what it reads: "
    "the limit), raw (a client loop that also records each message, as every engine's rows "
    "do), baseline (laneway's sync engine), thread, async, process.",
)
@click.option(
    "--messages",
    type=click.IntRange(min=1),
    help="Messages per run (default: per scenario; spike: requests produced at once).",
)
@click.option(
    "--partitions", callback=count_list, help="Partition counts, comma-separated (one run each)."
)
@click.option(
    "--keys",
    callback=key_list,
    help="Key counts, comma-separated (one run each), and how keys spread over the "
    "messages: uniform (the default) and/or zipf (a few hot keys carry most messages, as "
    "in real traffic), e.g. 100,zipf.",
)
@click.option(
    "--ordering",
    callback=ordering_list,
    help="Ordering modes, comma-separated: key, partition, unordered (one run each).",
)
@click.option(
    "--work-ms",
    callback=work_grid,
    help="Milliseconds of work per message for sleep, io, scaling (busy CPU) and keys "
    "(upper bound of the random wait); several, comma-separated, run each in turn (e.g. "
    "0,0.1,1,10,100 with the sleep scenario: blocking and asyncio waits).",
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
    "--value-format",
    type=click.Choice(["bytes", "json", "avro"]),
    default="bytes",
    show_default=True,
    help="What the records carry: bytes (10 ASCII digits), or a ~200-byte order record in "
    "JSON (decoded into a msgspec.Struct; needs laneway[json]) or Avro (decoded into a dict; "
    "needs laneway[avro]) that every engine, the raw loop included, decodes: the rows show "
    "what decoding costs.",
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
    "--status",
    is_flag=True,
    help="Run each laneway engine again with its status page served (history sampled every "
    "second, /status.json read every second as an open page does) and print the ratio.",
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
    "print each against consume-only (the plain row); the raw loop runs again writing "
    "every message it reads (raw+results: the client's own cost).",
)
@click.option(
    "--state",
    is_flag=True,
    help="Run each laneway engine again with a stateful handler counting each key's "
    "messages in a laneway.StateStore (changelog <topic>.state) and print the ratio to the "
    "plain row and the state's cost per message; with --batch-size also a stateful batch "
    "handler, against the batch row.",
)
@click.option(
    "--topic-prefix",
    default=DEFAULT_TOPIC_PREFIX,
    show_default=True,
    callback=topic_prefix_of,
    help="Start of the names of the topics and groups created on a Kafka broker (each run "
    "creates and deletes its own), e.g. to keep them apart on a shared broker.",
)
@click.option(
    "--topologies",
    default=",".join(DEFAULT_TOPOLOGIES),
    show_default=True,
    callback=topology_list,
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
    "--otlp-endpoint",
    metavar="URL",
    callback=http_url,
    help="spike and paced: export the producer's and the consumers' spans over OTLP/HTTP to "
    "this URL, as OTEL_EXPORTER_OTLP_ENDPOINT takes it (needs laneway[otlp]), e.g. "
    "$(scripts/jaeger status --otlp-http).",
)
@click.option(
    "--jaeger",
    metavar="URL|auto",
    callback=jaeger_url,
    help="spike and paced, with --otlp-endpoint: read each run's traces back from this "
    "Jaeger's query API (e.g. $(scripts/jaeger status --query)) and print the longest trace "
    "and the percentiles computed from the traces beside the bench's own; with --plot, draw "
    "each longest trace as a waterfall. auto: the checkout's Jaeger (scripts/jaeger, the "
    "running one or one started now and stopped at the end) for both, in place of "
    "--otlp-endpoint (the first start builds Jaeger: minutes).",
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
    keys: tuple[tuple[int, ...] | None, tuple[str, ...] | None],
    ordering: tuple[str, ...] | None,
    work_ms: tuple[float, ...] | None,
    cpu_iterations: int | None,
    concurrency: int | None,
    event_loop: str,
    ceilings: bool,
    repeat: int,
    timeout: float,
    bootstrap_servers: str | None,
    value_format: str,
    metrics: str | None,
    tracing: bool,
    status: bool,
    batch_size: int | None,
    results: bool,
    state: bool,
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
    otlp_endpoint: str | None,
    jaeger: str | None,
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
        from laneway.bench.engines.targets import BenchSetupError
        from laneway.bench.runner import BenchOptions, run_bench

        if loads:
            from laneway.bench.load.bench import LoadOptions
    except ModuleNotFoundError as error:
        raise missing_extra(error) from error
    if loads and partitions is not None and len(partitions) > 1:
        raise click.BadParameter(
            "spike and paced take one partition count", param_hint="--partitions"
        )
    if loads and trace_dir is not None:
        instruments_for(None, True)  # --traces needs the OpenTelemetry SDK, as --tracing does
    tracing_backend(loads, otlp_endpoint, jaeger)
    single = [s for s in scenarios if s in (MEMBERS, SHARE_SCENARIO)]
    if work_ms is not None and len(work_ms) > 1 and single:
        raise click.BadParameter(
            f"the {' and '.join(single)} scenario{'s take' if len(single) > 1 else ' takes'} "
            "one value; run the grid apart from them",
            param_hint="--work-ms",
        )
    key_counts, spreads = keys
    overrides = Overrides(
        messages=messages,
        partitions=partitions,
        keys=key_counts,
        spreads=spreads,
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
        instruments=instruments_for(metrics, tracing, status)
        + pipelines_for(batch_size, results, state),
        batch_size=batch_size or DEFAULT_BATCH_SIZE,
        value_format=value_format,
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
            otlp_endpoint=otlp_endpoint,
            jaeger=jaeger,
            plot_dir=plot_dir,
        ),
    )
    try:
        all_valid = run_bench(options)
    except BenchSetupError as error:
        raise click.ClickException(str(error)) from error
    if not all_valid:
        ctx.exit(1)


bench.add_command(compare)
bench.add_command(bus)
bench.add_command(byte_bound)
