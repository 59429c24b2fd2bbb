"""The JSON of ``laneway status``'s ``/status.json``: a group's partitions as Kafka (or the
embedded log) records them, joined with what each member says about the ones it owns."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from laneway.ops.cluster import Snapshot
from laneway.ops.top.view import Drain, View
from laneway.status.history import SERIES_POINTS

RATE_SAMPLES = 5
"""Samples the rates span (at ``laneway status``'s default 2 s interval: 10 s)."""

Member = tuple[str, dict[str, Any]]
"""A member's status URL and what it answered (``{"error": why}`` when it did not)."""


def joined(
    group: str,
    where: str,
    snapshots: Sequence[Snapshot],
    members: Sequence[Member],
    note: str = "",
    error: str = "",
) -> dict[str, Any]:
    """The group's status: totals, a row per member, a row per partition (Kafka's figures,
    the rates between samples, the owning member and its view of the partition), the
    members' stalls, failures and rebalances, and the backlog's history."""
    owned = _owned(members)
    view = rates(snapshots)
    if snapshots and not note:
        rows = [_kafka_row(p, view, owned, snapshots) for p in snapshots[-1].backlog.partitions]
    else:  # no reading of the log: what the members say
        rows = [dict(row, member=url) for (_, _), (url, row) in sorted(owned.items())]
    return {
        "kind": "group",
        "group": group,
        "where": where,
        "at": round(time.time(), 3),
        "note": note,
        "error": error,
        "totals": _totals(rows, view),
        "members": [_member_row(url, document) for url, document in members],
        "partitions": rows,
        "history": _history(snapshots),
        "lists": _lists(members),
        "failures": sorted(
            each_member(members, lambda d: d["failures"]), key=lambda f: -_number(f.get("at"))
        )[:20],
        "rebalances": sorted(
            each_member(members, lambda d: d["rebalances"]), key=lambda r: -_number(r.get("at"))
        )[:32],
    }


def _owned(members: Sequence[Member]) -> dict[tuple[str, int], tuple[str, dict[str, Any]]]:
    """Which member owns each partition, and its row for it (from its status)."""
    owned: dict[tuple[str, int], tuple[str, dict[str, Any]]] = {}
    for url, document in members:
        for row in document.get("partitions") or ():
            with contextlib.suppress(KeyError, TypeError, ValueError):
                owned[(str(row["topic"]), int(row["partition"]))] = (url, row)
    return owned


def _kafka_row(
    p: Any,
    view: Any,
    owned: dict[tuple[str, int], tuple[str, dict[str, Any]]],
    snapshots: Sequence[Snapshot],
) -> dict[str, Any]:
    pid = (p.topic, p.partition)
    done = None if view is None else round(view.done_rate(pid), 3)
    url, seen = owned.get(pid, (None, {}))
    clear: float | None = 0.0
    if p.backlog:
        clear = round(p.backlog / done, 1) if done else None
    if seen.get("stalled"):
        clear = None
    return {
        "topic": p.topic,
        "partition": p.partition,
        "committed": p.committed,
        "end": p.end,
        "lag": p.lag,
        "finished_beyond": p.finished_beyond,
        "backlog": p.backlog,
        "gaps": p.finished_runs,
        "done_rate": done,
        "in_rate": None if view is None else round(view.in_rate(pid), 3),
        "time_to_clear": clear,
        "member": url,
        "blocking_offset": seen.get("blocking_offset"),
        "oldest_seconds": seen.get("oldest_seconds"),
        "stalled": bool(seen.get("stalled")),
        "series": _series(snapshots, pid),
    }


def _totals(rows: list[dict[str, Any]], view: Any) -> dict[str, Any]:
    """Sums, and the time to clear that allows for skew: the slowest partition's."""
    slowest: str | None = None
    clear: float | None = 0.0
    for row in rows:
        if not row.get("backlog"):
            continue
        seconds = row.get("time_to_clear")
        if seconds is None:
            slowest, clear = f"{row['topic']}[{row['partition']}]", None
            break
        if clear is not None and seconds > clear:
            slowest, clear = f"{row['topic']}[{row['partition']}]", seconds
    return {
        "lag": sum(_number(row.get("lag")) for row in rows),
        "backlog": sum(_number(row.get("backlog")) for row in rows),
        "finished_beyond": sum(_number(row.get("finished_beyond")) for row in rows),
        "done_rate": None if view is None else round(view.done_rate(), 3),
        "in_rate": None if view is None else round(view.in_rate(), 3),
        "time_to_clear": clear,
        "slowest": slowest,
    }


def _member_row(url: str, document: dict[str, Any]) -> dict[str, Any]:
    if "error" in document:
        return {"url": url, "ok": False, "error": str(document["error"])}
    health = document.get("health") or {}
    counters = document.get("counters") or {}
    lists = document.get("lists") or {}
    stalled = lists.get("stalled", {}).get("entries", []) if isinstance(lists, dict) else []
    return {
        "url": url,
        "ok": True,
        "state": str(health.get("state", "")),
        "ready": bool(health.get("ready")),
        "reason": str(health.get("reason", "")),
        "partitions": [
            f"{row.get('topic')}[{row.get('partition')}]"
            for row in document.get("partitions") or ()
            if isinstance(row, dict)
        ],
        "rates": {
            name: _number((document.get("rates") or {}).get(name))
            for name in ("processed", "failed", "dead_lettered")
        },
        "in_flight": _number(counters.get("in_flight")),
        "buffered": _number(counters.get("buffered")),
        "stalled": len(stalled) if isinstance(stalled, list) else 0,
    }


def _lists(members: Sequence[Member]) -> dict[str, Any]:
    """Each member's lists (stalls, and whatever else members list), merged."""
    merged: dict[str, Any] = {}
    for url, document in members:
        lists = document.get("lists")
        if not isinstance(lists, dict):
            continue
        for name, listed in lists.items():
            if not isinstance(listed, dict) or not isinstance(listed.get("entries"), list):
                continue
            into = merged.setdefault(name, {"title": str(listed.get("title", name)), "entries": []})
            into["entries"] += [
                {"member": url, **e} for e in listed["entries"] if isinstance(e, dict)
            ]
    return merged


def _history(snapshots: Sequence[Snapshot]) -> dict[str, list[float]]:
    if not snapshots:
        return {"ago": [], "backlog": [], "lag": []}
    last = snapshots[-1].taken
    return {
        "ago": [round(last - s.taken, 1) for s in snapshots],
        "backlog": [float(s.backlog.backlog) for s in snapshots],
        "lag": [float(s.backlog.lag) for s in snapshots],
    }


def _series(snapshots: Sequence[Snapshot], pid: tuple[str, int]) -> list[int]:
    step = max(1, -(-len(snapshots) // SERIES_POINTS))
    found = []
    for snapshot in list(snapshots)[::-1][::step][::-1]:
        found += [p.backlog for p in snapshot.backlog.partitions if (p.topic, p.partition) == pid]
    return found


def _number(value: object) -> float:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else 0.0


def rates(snapshots: Sequence[Snapshot]) -> View | None:
    """Two snapshots :data:`RATE_SAMPLES` apart (or the two latest), as ``laneway top``
    compares them; ``None`` before the second sample."""
    if len(snapshots) < 2:
        return None
    drain = Drain()
    for snapshot in snapshots:  # the drain time as laneway top estimates it
        drain.add(snapshot)
    return View(
        snapshots[max(0, len(snapshots) - 1 - RATE_SAMPLES)], snapshots[-1], None, None, drain
    )


def each_member(
    members: Iterable[tuple[str, dict[str, Any]]], pick: Callable[[dict[str, Any]], Any]
) -> list[Any]:
    """``pick`` of every member that answered, with its URL as ``member``."""
    found = []
    for url, document in members:
        if "error" in document:
            continue
        with contextlib.suppress(KeyError, TypeError, ValueError, AttributeError):
            for item in pick(document):
                if isinstance(item, dict):
                    found.append({"member": url, **item})
    return found
