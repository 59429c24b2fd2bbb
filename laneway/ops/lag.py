"""``laneway lag``: how far behind a group really is."""

from __future__ import annotations

import json
from pathlib import Path

import click

from laneway.ops.cluster import GroupReader, Snapshot
from laneway.ops.connection import (
    EXIT_CODES_HELP,
    OpsError,
    connection_options,
    finish,
    resolve_settings,
)
from laneway.ops.tables import BACKLOG_HEADER, Cell, backlog_rows, render
from laneway.service import exits
from laneway.service.settings import Resolved

SUMMARY = (
    "Show how far behind a consumer group really is: per partition the committed offset, "
    "the log end, the lag, and the backlog (the lag minus the offsets laneway's commit "
    "metadata records as finished)."
)

HELP = f"""{SUMMARY}

\b
  committed  the next offset the group processes (-: never committed; the lag then
             counts from the log start, where a new laneway group begins)
  end        the log end offset (high watermark)
  lag        end - committed (what kafka-consumer-groups.sh shows)
  finished   offsets between committed and end that laneway finished already
             (from the commit metadata; 0 for a group laneway did not write)
  backlog    lag - finished: the messages still to process

Without --topic, the partitions the group committed or its members own. --json prints
{{"partitions": [{{"topic", "partition", "committed", "end", "lag", "finished_beyond",
"backlog"}}], "lag": N, "backlog": N}}. A share group (--share) commits no offsets and
confluent-kafka cannot read its start offsets yet: its lag and backlog are unknown, and
only the log ends of its --topic are shown.

The group, topics and connection default to laneway run's settings (LANEWAY_GROUP,
LANEWAY_TOPICS, --config FILE), so the same file and variables serve both.

{EXIT_CODES_HELP}
"""


@click.command("lag", help=HELP)
@click.option("--group", metavar="NAME", help="The consumer group [env LANEWAY_GROUP].")
@click.option(
    "--topic",
    "topics",
    multiple=True,
    metavar="NAME",
    help="Only this topic (repeat for more) [env LANEWAY_TOPICS].",
)
@click.option(
    "--share/--no-share",
    default=None,
    help="GROUP is a share group (needs --topic) [env LANEWAY_SHARE].",
)
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
@connection_options
def lag(
    group: str | None,
    topics: tuple[str, ...],
    share: bool | None,
    as_json: bool,
    bootstrap_servers: str | None,
    log_dir: str | None,
    config_file: Path | None,
) -> None:
    flags = {
        "group": group,
        "topics": topics,
        "share": share,
        "bootstrap_servers": bootstrap_servers,
    }
    finish("lag", lambda: _lag({**flags, "log_dir": log_dir}, config_file, as_json))


def group_and_topics(settings: Resolved) -> tuple[str, tuple[str, ...]]:
    """The group (required) and topics of resolved settings."""
    group = settings["group"]
    if not group:
        raise OpsError("no group: give --group NAME (or LANEWAY_GROUP)", exits.USAGE)
    return str(group), tuple(settings["topics"])


def _lag(flags: dict[str, object], config_file: Path | None, as_json: bool) -> int:
    settings = resolve_settings(flags, config_file)
    target = settings.target()
    group, topics = group_and_topics(settings)
    reader = GroupReader(target, group, topics, settings["share"])
    try:
        snapshot = reader.snapshot()
    finally:
        reader.close()
    click.echo(json.dumps(snapshot.as_json()) if as_json else describe(snapshot, target.where))
    return exits.OK


def describe(snapshot: Snapshot, where: str) -> str:
    """The snapshot as ``laneway lag`` prints it for a human."""
    title = f"group {snapshot.group} on {where}"
    if snapshot.share_group:
        rows: list[list[Cell]] = [
            [p.topic, p.partition, p.end] for p in snapshot.backlog.partitions
        ]
        table = render(("topic", "partition", "end"), rows) if rows else "(give --topic)"
        return f"{title}: {snapshot.note}\n\n{table}"
    if not snapshot.backlog.partitions:
        return f"{title}: no partitions (nothing committed or assigned)"
    return f"{title}\n\n{render(BACKLOG_HEADER, backlog_rows(snapshot.backlog))}"
