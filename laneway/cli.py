"""The ``laneway`` command."""

from __future__ import annotations

import os

import click

from laneway import __version__
from laneway.bench.command import bench
from laneway.options import EngineKind, names
from laneway.service.command import run

ENGINES = names(EngineKind)


@click.group()
@click.version_option(__version__, prog_name="laneway")
def main() -> None:
    """Parallel, key-ordered processing of Kafka and embedded-log messages."""


@main.command()
@click.option("--messages", default=5_000, show_default=True, type=click.IntRange(min=1))
@click.option("--partitions", default=8, show_default=True, type=click.IntRange(min=1))
@click.option("--keys", default=100, show_default=True, type=click.IntRange(min=1))
@click.option(
    "--work-ms",
    default=1.0,
    show_default=True,
    type=click.FloatRange(min=0),
    help="Simulated I/O per message.",
)
@click.option(
    "--engines",
    default=",".join(ENGINES),
    show_default=True,
    help="Comma-separated engines to run.",
)
def demo(messages: int, partitions: int, keys: int, work_ms: float, engines: str) -> None:
    """Produce a workload into an EmbeddedLog and consume it with each engine."""
    from laneway import demo as demo_module

    chosen = [e.strip() for e in engines.split(",") if e.strip()]
    unknown = [e for e in chosen if e not in ENGINES]
    if unknown or not chosen:
        raise click.BadParameter(
            f"{','.join(unknown) or engines!r}; allowed: {', '.join(ENGINES)}",
            param_hint="--engines",
        )
    os.environ[demo_module.WORK_MS_VARIABLE] = repr(work_ms)
    demo_module.WORK_SECONDS = work_ms / 1000.0
    click.echo(
        f"{messages:,} messages, {partitions} partitions, {keys} keys, "
        f"{work_ms:g} ms of I/O each, ordering=key, on the embedded log\n"
    )
    rows = []
    for engine in chosen:
        rows.append(demo_module.run_engine(engine, messages, partitions, keys))
        click.echo(f"  {engine}: done", err=True)
    click.echo(demo_module.format_table(rows))
    if not all(row.committed_all and row.messages >= messages for row in rows):
        raise SystemExit(1)


main.add_command(bench)
main.add_command(run)
