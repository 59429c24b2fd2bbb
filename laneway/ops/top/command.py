"""``laneway top``: a live view of a group (rich), or one snapshot as plain text."""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import click

from laneway.ops.cluster import GroupReader, Snapshot
from laneway.ops.connection import (
    EXIT_CODES_HELP,
    OpsError,
    connection_options,
    finish,
    resolve_settings,
)
from laneway.ops.lag import group_and_topics
from laneway.ops.member_metrics import MemberFigures, check_url, scrape
from laneway.ops.top.view import Drain, View, plain
from laneway.service import exits

SUMMARY = (
    "Watch a consumer group live: per partition the committed offset, log end, backlog "
    "and in-flight gaps, the rates, and what its members' /metrics report."
)

HELP = f"""{SUMMARY}

\b
  committed  the next offset to process: the oldest unfinished message
  backlog    what is left to process (see laneway lag)
  gaps       runs of unfinished offsets between the commit and the last finished
             one (from the commit metadata): the messages still in flight or held
  done/s     messages finished per second (the backlog's fall plus arrivals)
  in/s       messages written to the log per second
  age        with --metrics, how long the partition's oldest unfinished message has
             been in its handler (the largest any member reports): a slow or stuck
             key's partition shows here; keys themselves are never in the metrics
  waiting    with --metrics, the messages of the partition that cannot start until a
             call past stall_timeout returns (its key's; with ordering=partition, the
             partition's)

With --metrics the partitions whose state a member is restoring from its changelog (their
messages wait meanwhile) are listed with the records left to read, and the members' hottest
keys by id (a hash: the same key has the same id everywhere; the key itself is never
shown) with how many messages each holds.

Rates come from two samples --interval seconds apart. --once takes two samples, prints
one snapshot as plain text and exits (for scripts). The live view needs rich (pip install
'laneway[ops]'); Ctrl-C leaves it. top only reads: it never joins, commits or writes.

{EXIT_CODES_HELP}
"""


@click.command("top", help=HELP)
@click.option("--group", metavar="NAME", help="The consumer group [env LANEWAY_GROUP].")
@click.option("--topic", "topics", multiple=True, metavar="NAME", help="Only this topic (repeat).")
@click.option("--once", is_flag=True, help="Print one snapshot as plain text and exit.")
@click.option(
    "--interval",
    type=click.FloatRange(min=0.1, max=3600),
    default=2.0,
    show_default=True,
    help="Seconds between samples.",
)
@click.option(
    "--metrics",
    "metrics_urls",
    multiple=True,
    metavar="URL",
    help="A member's metrics address, e.g. 127.0.0.1:9108 (http and /metrics unless "
    "given); repeat per member.",
)
@connection_options
def top(
    group: str | None,
    topics: tuple[str, ...],
    once: bool,
    interval: float,
    metrics_urls: tuple[str, ...],
    bootstrap_servers: str | None,
    log_dir: str | None,
    config_file: Path | None,
) -> None:
    flags: dict[str, object] = {
        "group": group,
        "topics": topics,
        "bootstrap_servers": bootstrap_servers,
        "log_dir": log_dir,
    }
    finish("top", lambda: _top(flags, config_file, once, interval, metrics_urls))


def _top(
    flags: dict[str, object],
    config_file: Path | None,
    once: bool,
    interval: float,
    urls: Sequence[str],
) -> int:
    urls = [check_url(url) for url in urls]
    live = None if once else _rich_live()
    settings = resolve_settings(flags, config_file)
    target = settings.target()
    group, topics = group_and_topics(settings)
    reader = GroupReader(target, group, topics, settings["share"])
    try:
        before, members_before = reader.snapshot(), _scrape(urls)
        drain = Drain().add(before)
        if live is None:
            time.sleep(interval)
            now = reader.snapshot()
            view = View(before, now, members_before, _scrape(urls), drain.add(now))
            click.echo(plain(view, target.where))
            return exits.OK
        return _watch(live, reader, before, members_before, drain, urls, interval, target.where)
    finally:
        reader.close()


def _scrape(urls: Sequence[str]) -> MemberFigures | None:
    return scrape(urls) if urls else None


def _watch(
    live: Any,
    reader: GroupReader,
    before: Snapshot,
    members: MemberFigures | None,
    drain: Drain,
    urls: Sequence[str],
    interval: float,
    where: str,
) -> int:
    from laneway.ops.top.live import frame

    try:
        with live(frame(None, where), refresh_per_second=4, screen=False) as screen:
            while True:
                time.sleep(interval)
                now = reader.snapshot()
                view = View(before, now, members, _scrape(urls), drain.add(now))
                screen.update(frame(view, where))
                before, members = view.now, view.members_now
    except KeyboardInterrupt:
        return exits.OK


def _rich_live() -> Any:
    try:
        from rich.live import Live
    except ImportError:
        raise OpsError(
            "the live view needs rich: pip install 'laneway[ops]' (or use --once for plain text)",
            exits.USAGE,
        ) from None
    return Live
