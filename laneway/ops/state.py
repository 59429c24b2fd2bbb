"""``laneway state``: a stateful consumer's per-key state, read from its changelog."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from laneway.ops.connection import (
    EXIT_CODES_HELP,
    OpsError,
    connection_options,
    finish,
    resolve_settings,
)
from laneway.ops.tables import Cell, render
from laneway.printable import printable_bytes
from laneway.service import exits
from laneway.state.reading import ChangelogStates, KeyState, latest_states, open_changelog

SUMMARY = (
    "Read a stateful consumer's per-key state from its changelog topic (get one key's, or "
    "dump every key's), without joining its group; values only with --show-values."
)

HELP = f"""{SUMMARY}

\b
  get   one key's state: its partition, the input offset that last changed it,
        the changelog offset of that record and the value's size
  dump  the same for every key with a state (deleted keys are left out)

The state is what a restore would build: per key the changelog record with the highest
input offset (on Kafka committed records only, up to the last stable offset). A value is
message data: it is shown only with --show-values. Keys and values are shown as text,
with non-printable characters and bytes that are not UTF-8 escaped (\\x1b, \\xff); a
keyless message's state is the empty key.

The changelog and the connection default to laneway run's settings
(LANEWAY_STATE_CHANGELOG, --config FILE), so the same file and variables serve both.
An embedded log can be read only while no laneway run holds it.

{EXIT_CODES_HELP}
"""

CHANGELOG_HELP = "The changelog topic [env LANEWAY_STATE_CHANGELOG]."
VALUES_HELP = "Show the values too (message data: off by default)."
JSON_HELP = "Print JSON instead of a table."

F = TypeVar("F", bound=Callable[..., Any])


@click.group("state", help=HELP)
def state() -> None:
    pass


def reading_options(command: F) -> F:
    """The options ``get`` and ``dump`` share: the changelog, what to show, the connection."""
    command = connection_options(command)
    command = click.option("--json", "as_json", is_flag=True, help=JSON_HELP)(command)
    command = click.option("--show-values", is_flag=True, help=VALUES_HELP)(command)
    return click.option("--changelog", metavar="TOPIC", help=CHANGELOG_HELP)(command)


@state.command("get", help="One key's state (see laneway state --help).")
@click.option("--key", required=True, metavar="KEY", help="The key, as UTF-8 text.")
@reading_options
def get(key: str, **given: Any) -> None:
    _finish(key.encode(), **given)


@state.command("dump", help="Every key's state (see laneway state --help).")
@reading_options
def dump(**given: Any) -> None:
    _finish(None, **given)


def _finish(
    key: bytes | None,
    changelog: str | None,
    show_values: bool,
    as_json: bool,
    bootstrap_servers: str | None,
    log_dir: str | None,
    config_file: Path | None,
) -> None:
    flags: dict[str, object] = {"state_changelog": changelog, "log_dir": log_dir}
    flags["bootstrap_servers"] = bootstrap_servers
    finish("state", lambda: _show(flags, config_file, key, show_values, as_json))


def _show(
    flags: dict[str, object],
    config_file: Path | None,
    key: bytes | None,
    show_values: bool,
    as_json: bool,
) -> int:
    settings = resolve_settings(flags, config_file)
    topic = settings["state_changelog"]
    if not topic:
        raise OpsError(
            "no changelog: give --changelog TOPIC (or LANEWAY_STATE_CHANGELOG)", exits.USAGE
        )
    log = open_changelog(settings.target())
    try:
        found = latest_states(log, topic, key)
    finally:
        log.close()
    if found.records and found.skipped == found.records:
        raise OpsError(
            f"topic {topic} is not a laneway changelog: none of its {found.records} records "
            "carries the laneway.state.offset header a state store writes (give the "
            "--state-changelog topic of laneway run)",
            exits.SOURCE,
        )
    states = sorted(found.states.values(), key=lambda s: (s.partition, s.key))
    if as_json:
        document = {
            "changelog": topic,
            "states": [_as_json(s, show_values) for s in states],
            "records": found.records,
            "skipped": found.skipped,
        }
        click.echo(json.dumps(document))
        return exits.OK
    click.echo(describe(topic, found, states, key, show_values))
    return exits.OK


def describe(
    topic: str,
    found: ChangelogStates,
    states: list[KeyState],
    key: bytes | None,
    show_values: bool,
) -> str:
    """What ``laneway state get`` and ``dump`` print for a human."""
    title = f"changelog {topic}: {found.records} records read"
    if found.skipped:
        title += f", {found.skipped} skipped (no laneway offset header: not a state record)"
    if not states:
        what = "no state" if key is None else f"no state for key {printable_bytes(key)}"
        return f"{title}\n{what}"
    header = ["partition", "key", "input offset", "changelog offset", "bytes"]
    if show_values:
        header.append("value")
    rows: list[list[Cell]] = []
    for s in states:
        size = len(s.value or b"")
        row: list[Cell] = [s.partition, printable_bytes(s.key), s.offset, s.position, size]
        if show_values:
            row.append(printable_bytes(s.value or b""))
        rows.append(row)
    return f"{title}\n\n{render(header, rows)}"


def _as_json(state: KeyState, show_values: bool) -> dict[str, object]:
    shown: dict[str, object] = {
        "partition": state.partition,
        "key": printable_bytes(state.key),
        "offset": state.offset,
        "changelog_offset": state.position,
        "bytes": len(state.value or b""),
    }
    if show_values:
        shown["value"] = printable_bytes(state.value or b"")
    return shown
