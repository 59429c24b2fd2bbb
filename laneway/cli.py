"""The ``laneway`` command.

``run``, ``bench`` and the operator's ``lag``, ``top``, ``status``, ``state`` and ``dlq`` are
imported when first used (run, or asked for ``--help``), not when ``laneway`` starts:
``laneway run`` never loads the benchmark suite, and ``laneway --help`` lists them by the
summaries in :data:`LAZY_COMMANDS`. ``demo`` is defined here, cheaply; its workload
(:mod:`laneway.demo`) is imported when it runs.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import click

from laneway import __version__
from laneway.options import EngineKind, names

ENGINES = names(EngineKind)


@dataclass(frozen=True)
class LazyCommand:
    """A subcommand imported on first use: ``where`` is ``"module:attribute"``, ``summary``
    the first paragraph of its help (what ``laneway --help`` shows without importing it;
    a test checks it against the command's own help)."""

    where: str
    summary: str

    def load(self) -> click.Command:
        module, _, attribute = self.where.partition(":")
        command = getattr(importlib.import_module(module), attribute)
        if not isinstance(command, click.Command):
            raise TypeError(f"{self.where} is not a click command")
        return command


LAZY_COMMANDS: Mapping[str, LazyCommand] = {
    "bench": LazyCommand(
        "laneway.bench.command:bench",
        "Measure which engine fits which workload, with numbers.",
    ),
    "run": LazyCommand(
        "laneway.service.command:run",
        "Run HANDLER (MODULE:ATTR, imported like uvicorn's app) on every message of a Kafka "
        "consumer group (--share: a share group) or a durable embedded log, until "
        "SIGTERM/SIGINT (drain, commit, exit 0).",
    ),
    "lag": LazyCommand(
        "laneway.ops.lag:lag",
        "Show how far behind a consumer group really is: per partition the committed "
        "offset, the log end, the lag, and the backlog (the lag minus the offsets laneway's "
        "commit metadata records as finished).",
    ),
    "top": LazyCommand(
        "laneway.ops.top.command:top",
        "Watch a consumer group live: per partition the committed offset, log end, backlog "
        "and in-flight gaps, the rates, and what its members' /metrics report.",
    ),
    "status": LazyCommand(
        "laneway.ops.status:status",
        "Serve one status page for a whole group (on loopback): Kafka's view of every "
        "partition, as laneway lag reads it, joined with each member's /status.json.",
    ),
    "state": LazyCommand(
        "laneway.ops.state:state",
        "Read a stateful consumer's per-key state from its changelog topic (get one key's, "
        "or dump every key's), without joining its group; values only with --show-values.",
    ),
    "dlq": LazyCommand(
        "laneway.ops.dlq.command:dlq",
        "List, show and replay the dead letters of a dead-letter topic (Kafka or a durable "
        "embedded log).",
    ),
}
"""The subcommands imported on first use (click's "lazily loading subcommands")."""


class LazyGroup(click.Group):
    """A group that imports the commands of ``lazy`` when one is run or asked for help,
    and lists them in its own help by their summaries, importing none."""

    def __init__(self, *args: Any, lazy: Mapping[str, LazyCommand], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.lazy = dict(lazy)

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *self.lazy})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name in self.lazy and cmd_name not in self.commands:
            self.add_command(self.lazy[cmd_name].load(), cmd_name)
        return super().get_command(ctx, cmd_name)

    def listed(self, cmd_name: str) -> click.Command | None:
        """The command as ``--help`` lists it: itself once imported (or defined here),
        else a stand-in carrying its summary."""
        command = self.commands.get(cmd_name)
        if command is None and cmd_name in self.lazy:
            command = click.Command(cmd_name, help=self.lazy[cmd_name].summary)
        return command

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """click's own listing, with :meth:`listed` in place of :meth:`get_command`."""
        commands = []
        for name in self.list_commands(ctx):
            command = self.listed(name)
            if command is not None and not command.hidden:
                commands.append((name, command))
        if commands:
            limit = formatter.width - 6 - max(len(name) for name, _ in commands)
            rows = [(name, command.get_short_help_str(limit)) for name, command in commands]
            with formatter.section("Commands"):
                formatter.write_dl(rows)


@click.group(cls=LazyGroup, lazy=LAZY_COMMANDS)
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
