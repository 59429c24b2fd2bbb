"""``laneway dlq list|show|replay``: the click commands."""

from __future__ import annotations

import json
import signal
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import click

from laneway.errors import ConfigError, UnknownTopicError
from laneway.ops.connection import (
    EXIT_CODES_HELP,
    OpsError,
    connection_options,
    finish,
    resolve_settings,
)
from laneway.ops.dlq.records import DeadLetter
from laneway.ops.dlq.replay import (
    DEFAULT_MAX_REPLAYS,
    Replay,
    ReplayReport,
    default_group,
)
from laneway.ops.dlq.selection import Selection
from laneway.ops.dlq.views import (
    BY_MESSAGE,
    BY_TYPE,
    letter_lines,
    list_lines,
    list_summary,
    replay_lines,
)
from laneway.service import exits
from laneway.sources.backends import open_dead_letters
from laneway.sources.targets import DeadLetterLog, Target
from laneway.sources.topic_names import check_topic_name

SUMMARY = (
    "List, show and replay the dead letters of a dead-letter topic (Kafka or a durable "
    "embedded log)."
)

HELP = f"""{SUMMARY}

\b
  laneway dlq list   --bootstrap-servers B --topic orders.dlq
  laneway dlq show   --bootstrap-servers B --topic orders.dlq --where type=ValueError
  laneway dlq replay --bootstrap-servers B --topic orders.dlq --dry-run

{EXIT_CODES_HELP}
"""

F = TypeVar("F", bound=Callable[..., Any])


def _selection_options(command: F) -> F:
    command = click.option(
        "--until", metavar="TIME", help="Only records dead-lettered at or before TIME."
    )(command)
    command = click.option(
        "--since",
        metavar="TIME",
        help="Only records dead-lettered at or after TIME: ISO 8601 (UTC unless it says "
        "otherwise), or an age such as 30m, 2h, 1d.",
    )(command)
    command = click.option(
        "--where",
        multiple=True,
        metavar="CLAUSE",
        help="Only matching records: type=NAME (error type), topic=NAME (original topic) "
        "or message~TEXT (error message contains TEXT). Repeat: the same field any of, "
        "different fields all of.",
    )(command)
    command = click.option(
        "--topic", required=True, metavar="NAME", help="The dead-letter topic, e.g. orders.dlq."
    )(command)
    return connection_options(command)


@click.group("dlq", help=HELP)
def dlq() -> None:
    """The ``laneway dlq`` group."""


@dlq.command(
    "list",
    help="Count the dead letters by original topic and error type (--by message: and error "
    "message), with the time range they were dead-lettered in. Reads the whole topic; "
    "commits nothing. A topic whose records carry no laneway dead-letter headers is not a "
    "dead-letter topic: exit 2.",
)
@_selection_options
@click.option(
    "--by",
    type=click.Choice([BY_TYPE, BY_MESSAGE]),
    default=BY_TYPE,
    show_default=True,
    help="A row per error type (with an example message), or per error message.",
)
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
def list_command(by: str, as_json: bool, **given: Any) -> None:
    finish("dlq list", lambda: _list(by, as_json, **given))


@dlq.command(
    "show",
    help="Print dead letters with their laneway headers (error type, message, attempts, "
    "origin, replay count). Keys, values and the record's own headers' values are record "
    "contents: shown only with --values. Reads; commits nothing.",
)
@_selection_options
@click.option("--values", is_flag=True, help="Also print keys, values and other headers' values.")
@click.option("--traceback", "tracebacks", is_flag=True, help="Also print each traceback.")
@click.option(
    "--limit", type=click.IntRange(min=1), default=20, show_default=True, help="Records to print."
)
def show_command(values: bool, tracebacks: bool, limit: int, **given: Any) -> None:
    finish("dlq show", lambda: _show(values, tracebacks, limit, **given))


@dlq.command(
    "replay",
    help="Write dead letters back to their original topic and partition (or --to TOPIC), "
    "without laneway's dead-letter headers and with laneway.replay.count raised by one. "
    "Resumable: the replay group (--group; by default derived from the topic, the "
    "selection and --to) is committed after each batch is acknowledged, so a run killed "
    "midway resumes where it stopped, writing at most its last batch again (at least "
    "once). A record replayed --max-replays times already stays in the dead-letter topic "
    "and is counted, as is one whose headers are unusable. Exit 1 also when stopped "
    "(SIGINT/SIGTERM) before the end.",
)
@_selection_options
@click.option("--to", metavar="TOPIC", help="Write every record to TOPIC instead.")
@click.option(
    "--group", metavar="NAME", help="The replay group (committed as records are written)."
)
@click.option(
    "--max-rate",
    type=click.FloatRange(min=0.001),
    metavar="N",
    help="At most N records per second on average.",
)
@click.option(
    "--max-replays",
    type=click.IntRange(min=1),
    default=DEFAULT_MAX_REPLAYS,
    show_default=True,
    help="Leave records replayed this many times already.",
)
@click.option(
    "--dry-run", is_flag=True, help="Count what would be replayed; write and commit nothing."
)
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
def replay_command(
    to: str | None,
    group: str | None,
    max_rate: float | None,
    max_replays: int,
    dry_run: bool,
    as_json: bool,
    **given: Any,
) -> None:
    finish(
        "dlq replay",
        lambda: _replay(to, group, max_rate, max_replays, dry_run, as_json, **given),
    )


@contextmanager
def _dead_letters(
    topic: str, bootstrap_servers: str | None, log_dir: str | None, config_file: Path | None
) -> Iterator[tuple[Target, DeadLetterLog]]:
    check_topic_name(topic, "--topic")
    flags = {"bootstrap_servers": bootstrap_servers, "log_dir": log_dir}
    target = resolve_settings(flags, config_file).target()
    log = open_dead_letters(target, topic)
    try:
        yield target, log
    finally:
        log.close()


def _letters(
    log: DeadLetterLog, selection: Selection, foreign: Counter[str]
) -> Iterator[DeadLetter]:
    """The dead letters of the selection; ``foreign`` counts the records ``read`` and
    those ``without`` laneway's dead-letter headers (never selected)."""
    while (batch := log.read(500)) is not None:
        for message in batch:
            letter = DeadLetter.of(message)
            foreign["read"] += 1
            if not letter.is_dead_letter:
                foreign["without"] += 1
            elif selection.matches(letter):
                yield letter


def _check_dead_letter_topic(topic: str, foreign: Counter[str]) -> None:
    """A topic none of whose records is a dead letter is the wrong topic."""
    if foreign["read"] and foreign["without"] == foreign["read"]:
        raise OpsError(
            f"{topic} is not a dead-letter topic: none of its {foreign['read']} records "
            "carries laneway's dead-letter headers (laneway.error.*, laneway.original.*); a "
            "consumer's dead letters go to its dead_letter_topic (by default <topic>.dlq)",
            exits.USAGE,
        )


def _list(
    by: str,
    as_json: bool,
    topic: str,
    where: tuple[str, ...],
    since: str | None,
    until: str | None,
    **connection: Any,
) -> int:
    selection = Selection.parse(where, since, until)
    foreign: Counter[str] = Counter()
    with _dead_letters(topic, **connection) as (target, log):
        log.start(None)
        summary = list_summary(_letters(log, selection, foreign), by)
    _check_dead_letter_topic(topic, foreign)
    if foreign["without"]:
        summary["not_dead_letters"] = foreign["without"]
    if as_json:
        click.echo(json.dumps({"topic": topic, "selection": selection.describe(), **summary}))
    else:
        click.echo("\n".join(list_lines(topic, target.where, selection, summary)))
    return exits.OK


def _show(
    values: bool,
    tracebacks: bool,
    limit: int,
    topic: str,
    where: tuple[str, ...],
    since: str | None,
    until: str | None,
    **connection: Any,
) -> int:
    selection = Selection.parse(where, since, until)
    shown = more = 0
    foreign: Counter[str] = Counter()
    with _dead_letters(topic, **connection) as (_, log):
        log.start(None)
        for letter in _letters(log, selection, foreign):
            if shown < limit:
                click.echo("\n".join(letter_lines(letter, values, tracebacks)) + "\n")
                shown += 1
            else:
                more += 1
    _check_dead_letter_topic(topic, foreign)
    tail = " (raise --limit for more)" if more else ""
    click.echo(f"shown {shown} of {shown + more} dead letters ({selection.describe()}){tail}")
    return exits.OK


def _replay(
    to: str | None,
    group: str | None,
    max_rate: float | None,
    max_replays: int,
    dry_run: bool,
    as_json: bool,
    topic: str,
    where: tuple[str, ...],
    since: str | None,
    until: str | None,
    **connection: Any,
) -> int:
    selection = Selection.parse(where, since, until)
    if to is not None:
        check_topic_name(to, "--to")
        if to == topic:
            raise ConfigError(f"--to {to} is the dead-letter topic itself")
    name = group or default_group(topic, selection, to)
    with _dead_letters(topic, **connection) as (target, log):
        if to is not None and log.partitions(to) is None:
            raise UnknownTopicError(f"--to {to}: no such topic on {target.where}")
        log.start(name)
        report = ReplayReport(topic, name, dry_run)
        run = Replay(log, report, selection, to, max_replays, max_rate)
        with _stop_on_signals(run):
            run.run()
    if as_json:
        click.echo(json.dumps(report.as_json()))
    else:
        click.echo("\n".join(replay_lines(report, target.where, selection, max_replays)))
    return exits.OK if report.complete else exits.FAILED


@contextmanager
def _stop_on_signals(run: Replay) -> Iterator[None]:
    """SIGINT and SIGTERM stop the run after the batch in hand (written and committed)."""

    def stop(signum: int, frame: object) -> None:
        run.stopping = True

    previous = {s: signal.signal(s, stop) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)
