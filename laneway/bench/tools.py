"""``laneway bench`` subcommands beside the scenario runs: ``compare`` two JSON results,
the embedded log as a ``bus``, and the ``byte-bound`` memory check on Kafka."""

from __future__ import annotations

from pathlib import Path

import click

from laneway.bench.option_parsing import missing_extra, name_list


@click.command()
@click.argument("a", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.argument("b", type=click.Path(exists=True, dir_okay=False, path_type=Path))
def compare(a: Path, b: Path) -> None:
    """Print B's throughput relative to A's for every (scenario, variant, engine)."""
    try:
        from laneway.bench.reporting.compare import print_comparison
        from laneway.bench.runner import stdout_console
    except ModuleNotFoundError as error:
        raise missing_extra(error) from error
    try:
        print_comparison(stdout_console(), a, b)
    except ValueError as error:
        raise click.ClickException(str(error)) from error


@click.command()
@click.option(
    "--engines",
    default="sync,async",
    show_default=True,
    callback=name_list(("sync", "thread", "async", "process")),
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
    under a slow consumer (see laneway/bench/flow/bus.py)."""
    try:
        from laneway.bench.flow import bus as bus_bench
        from laneway.bench.reporting.rows import machine, machine_line, write_json
        from laneway.bench.runner import stdout_console
    except ModuleNotFoundError as error:
        raise missing_extra(error) from error
    console = stdout_console()
    console.print(machine_line(), highlight=False, soft_wrap=True)
    result = bus_bench.measure(engines, rate, seconds, capacity, slow_ms, rate)
    bus_bench.print_report(console, result)
    if json_path is not None:
        write_json(json_path, {"machine": machine(), **result})
        click.echo(f"wrote {json_path}")


@click.command("byte-bound")
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
    laneway/bench/flow/byte_bound.py). Exits 1 when the peak exceeds it."""
    try:
        from laneway.bench.flow import byte_bound as bound_bench
        from laneway.bench.reporting.rows import machine, machine_line, write_json
    except ModuleNotFoundError as error:
        raise missing_extra(error) from error
    click.echo(machine_line())
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
