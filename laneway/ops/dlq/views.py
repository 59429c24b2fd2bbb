"""What ``laneway dlq`` prints: the list's counts, a record, a replay's report.

Keys, values and the values of a record's own headers are record contents: printed only
when asked (``show --values``). laneway's own headers (error type and message, attempts,
origin, replay count) are printed; tracebacks only with ``show --traceback``. Anyone who
can write the topic can write any of it, so every name and text is printed through
:func:`~laneway.printable.printable` (tables through :func:`~laneway.ops.tables.render`):
nothing in a record can move the cursor, clear the screen or start a line of its own.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from laneway.ops.dlq.records import ERROR_PREFIX, DeadLetter, short
from laneway.ops.dlq.replay import ReplayReport
from laneway.ops.dlq.selection import Selection, format_time
from laneway.ops.tables import render
from laneway.printable import printable

TRACEBACK = ERROR_PREFIX + "traceback"


BY_TYPE, BY_MESSAGE = "type", "message"
"""How ``laneway dlq list`` groups: by original topic and error type (one row per kind of
failure, with an example message), or also by the exact error message."""


def list_summary(letters: Iterable[DeadLetter], by: str = BY_TYPE) -> dict[str, Any]:
    """``records``, ``first`` / ``last`` (ISO times) and ``groups``: the count, first and
    last time per original topic and error type (``by`` :data:`BY_TYPE`: with an
    ``example_message`` and how many distinct ``messages``) or also per (shortened) error
    message (:data:`BY_MESSAGE`: ``error_message``), most first."""
    groups: dict[tuple[str, ...], list[Any]] = {}
    first = last = None
    total = 0
    for letter in letters:
        total += 1
        stamp = letter.message.timestamp
        first = stamp if first is None else min(first, stamp)
        last = stamp if last is None else max(last, stamp)
        message = short(letter.error_message)
        key: tuple[str, ...] = (
            short(letter.original_topic or "(unknown)", 60),
            short(letter.error_type, 80),
        )
        if by == BY_MESSAGE:
            key += (message,)
        found = groups.setdefault(key, [0, stamp, stamp, {}])
        found[0] += 1
        found[1], found[2] = min(found[1], stamp), max(found[2], stamp)
        found[3].setdefault(message, None)
    ordered = sorted(groups.items(), key=lambda item: (-item[1][0], item[0]))
    return {
        "records": total,
        "first": None if first is None else format_time(first),
        "last": None if last is None else format_time(last),
        "groups": [_group(key, found, by) for key, found in ordered],
    }


def _group(key: tuple[str, ...], found: list[Any], by: str) -> dict[str, Any]:
    count, start, end, messages = found
    group: dict[str, Any] = {"original_topic": key[0], "error_type": key[1]}
    if by == BY_MESSAGE:
        group["error_message"] = key[2]
    else:
        group["example_message"] = next(iter(messages))
        group["messages"] = len(messages)
    return {**group, "count": count, "first": format_time(start), "last": format_time(end)}


def list_lines(topic: str, where: str, selection: Selection, summary: dict[str, Any]) -> list[str]:
    """``laneway dlq list`` for a human."""
    head = f"{topic} on {where} ({selection.describe()}): {summary['records']} dead letters"
    if summary.get("not_dead_letters"):
        head += (
            f" (and {summary['not_dead_letters']} records without laneway's dead-letter "
            "headers, left out)"
        )
    if not summary["records"]:
        return [head]
    groups = summary["groups"]
    if groups and "error_message" in groups[0]:
        header: tuple[str, ...] = ("count", "original topic", "error type", "error message")
        rows = [[g["count"], g["original_topic"], g["error_type"], g["error_message"], g["last"]]
                for g in groups]  # fmt: skip
    else:
        header = ("count", "original topic", "error type", "messages", "for example")
        rows = [[g["count"], g["original_topic"], g["error_type"], g["messages"],
                 short(g["example_message"], 80), g["last"]] for g in groups]  # fmt: skip
    table = render((*header, "last"), rows)
    lines = [f"{head}, {summary['first']} .. {summary['last']}", "", table]
    if "error_message" not in (groups[0] if groups else {}):
        lines += ["", "(--by message: a row per error message)"]
    return lines


def _size(data: bytes | None) -> str:
    return "null" if data is None else f"{len(data)} bytes"


def letter_lines(letter: DeadLetter, values: bool, tracebacks: bool) -> list[str]:
    """One dead letter for ``laneway dlq show``."""
    m, h = letter.message, letter.headers
    lines = [
        f"{m.topic}[{m.partition}] offset {m.offset}, dead-lettered {format_time(m.timestamp)}"
    ]
    if values:  # bytes literals: repr escapes every byte that is not printable ASCII
        lines.append(f"  key: {m.key!r}")
        lines.append(f"  value: {m.value!r}")
    else:
        lines.append(f"  key: {_size(m.key)}, value: {_size(m.value)} (--values shows them)")
    for name, text in h.items():
        if name == TRACEBACK and tracebacks:
            lines.append(f"  {printable(name)}:")
            lines += [f"    {printable(line)}" for line in text.splitlines()]
        elif name == TRACEBACK:
            lines.append(f"  {name}: {len(text)} characters (--traceback shows it)")
        else:
            lines.append(f"  {printable(name)}: {printable(short(text, 500))}")
    own = [(printable(name), value) for name, value in m.headers if not name.startswith("laneway.")]
    if own and values:
        lines += [f"  {name}: {value!r}" for name, value in own]  # bytes: escaped by repr
    elif own:
        lines.append(f"  other headers: {', '.join(name for name, _ in own)} (--values shows them)")
    return lines


def replay_lines(
    report: ReplayReport, where: str, selection: Selection, max_replays: int
) -> list[str]:
    """A replay's report for a human."""
    verb = "would replay" if report.dry_run else "replayed"
    targets = ", ".join(f"{topic}: {count}" for topic, count in sorted(report.targets.items()))
    lines = [
        f"replay of {report.topic} on {where}, group {report.group}",
        f"selection: {selection.describe()}",
        f"read {report.read}, selected {report.selected}, {verb} {report.replayed}"
        + (f" ({targets})" if targets else ""),
    ]
    left = sum(report.unusable.values())
    if report.at_limit or left:
        lines.append(
            f"left in {report.topic}: {report.at_limit} at --max-replays {max_replays}, "
            f"{left} with unusable headers or targets"
        )
        lines += [f"  {count:>6}  {printable(why)}" for why, count in report.unusable.most_common()]
    if report.set_aside:
        lines.append(
            f"set aside (refused by the log, left in {report.topic}): "
            f"{sum(report.set_aside.values())}"
        )
        lines += [
            f"  {count:>6}  {printable(why)}" for why, count in report.set_aside.most_common()
        ]
    if report.dry_run:
        lines.append("dry run: nothing written, nothing committed")
    elif not report.complete:
        lines.append("stopped before the end: run the same command again to resume")
    return lines
