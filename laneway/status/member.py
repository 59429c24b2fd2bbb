"""MemberStatus: what one consumer shows on its status page, as the JSON of ``GET
/status.json``."""

from __future__ import annotations

import dataclasses
import enum
import os
import time
from collections.abc import Mapping, Sequence
from typing import Any

from laneway import __version__
from laneway.consumer import Consumer
from laneway.control.backlog import Backlog
from laneway.stats import ConsumerStats
from laneway.status.entries import as_json, entries
from laneway.status.history import PartitionTrend, StatusHistory

LISTS: Mapping[str, str] = {
    "stalled": "Stalled messages",
    "restoring": "State restores",
    "not_durable": "State not durable",
}
"""The fields of ``ConsumerStats`` the page shows as tables (field -> title), each entry
field by field (see :mod:`laneway.status.entries`): one more here is one more table."""

ConfigRow = tuple[str, str, str]
"""A setting as ``--print-config`` shows it: name, value (secrets redacted), origin."""


class MemberStatus:
    """The status of ``consumer`` for ``GET /status.json``: its health, counters and
    rates, each owned partition (committed offset, log end, lag, backlog, gaps, the
    oldest running message's age, the offset holding the commit point, done/s, time to
    clear and its trend), stalls, the last failures (never a value), the rebalance
    timeline, process workers and the effective configuration (``config``: as
    ``--print-config`` shows it, secrets redacted; by default the consumer's options).

    Message keys appear only with ``show_keys=True``. :meth:`start` begins keeping the
    history behind the trends (see :class:`~laneway.status.history.StatusHistory`);
    :meth:`stop` ends it.
    """

    def __init__(
        self,
        consumer: Consumer,
        *,
        show_keys: bool = False,
        source: str = "",
        config: Sequence[ConfigRow] | None = None,
    ) -> None:
        self._consumer = consumer
        self.show_keys = show_keys
        self._source = source
        self._config = list(config) if config is not None else options_of(consumer)
        self.history = StatusHistory(consumer.backlog, consumer.stats)

    def start(self) -> None:
        self.history.start()

    def stop(self) -> None:
        self.history.stop()

    def document(self) -> dict[str, Any]:
        """The JSON of ``GET /status.json``."""
        consumer, keys = self._consumer, self.show_keys
        health, stats, backlog = consumer.health(), consumer.stats(), consumer.backlog()
        rows = partitions(stats, backlog, self.history.trends(), self.history, keys)
        config = consumer.config
        return {
            "kind": "member",
            "version": __version__,
            "at": round(time.time(), 3),
            "source": self._source,
            "health": {
                "live": health.live,
                "ready": health.ready,
                "state": health.state,
                "reason": health.reason,
            },
            "engine": {
                "engine": config.engine.value,
                "ordering": config.ordering.value,
                "concurrency": config.concurrency,
                "max_buffered": config.max_buffered,
            },
            "counters": counters(stats),
            "latency_ms": as_json(stats.latency_ms, keys),
            "rates": {name: round(rate, 3) for name, rate in self.history.rates().items()},
            "backlog": headline(backlog, rows),
            "partitions": rows,
            "history": self.history.series(),
            "lists": {
                name: {"title": title, "entries": entries(getattr(stats, name), keys)}
                for name, title in LISTS.items()
            },
            "failures": entries(reversed(stats.recent_failures), keys),
            "rebalances": entries(reversed(stats.rebalances_seen), keys),
            "workers": [
                {"pid": pid, "rss_bytes": resident_bytes(pid)} for pid in stats.worker_pids
            ],
            "config": [{"name": n, "value": v, "origin": o} for n, v, o in self._config],
            "show_keys": keys,
        }


def counters(stats: ConsumerStats) -> dict[str, Any]:
    """Every number of ``stats`` (a field added to it shows up here too)."""
    found: dict[str, Any] = {}
    for each in dataclasses.fields(stats):
        value = getattr(stats, each.name)
        if value is None or isinstance(value, (bool, int, float)):
            found[each.name] = round(value, 3) if isinstance(value, float) else value
    found["handled"] = stats.handled
    return found


def headline(backlog: Backlog, rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The backlog's figures and the time to clear it that allows for skew: the slowest
    partition's (each partition drains only as fast as its own messages finish; unknown
    while one with a backlog finishes nothing or is stalled), besides ``drain_seconds``,
    the total over the total rate; ``trend``: the backlog's change per second."""
    slowest: str | None = None
    clear: float | None = 0.0
    for row in rows:
        if not row["backlog"]:
            continue
        seconds = row["time_to_clear"]
        if seconds is None:
            slowest, clear = f"{row['topic']}[{row['partition']}]", None
            break
        if clear is not None and seconds > clear:
            slowest, clear = f"{row['topic']}[{row['partition']}]", seconds
    found = backlog.as_json()
    del found["partitions"]
    found["time_to_clear"] = clear
    found["slowest"] = slowest
    found["trend"] = round(sum(row["trend"] or 0.0 for row in rows), 3)
    return found


def partitions(
    stats: ConsumerStats,
    backlog: Backlog,
    trends: Mapping[tuple[str, int], PartitionTrend],
    history: StatusHistory,
    keys: bool,
) -> list[dict[str, Any]]:
    """A row per owned partition (those whose log end is not known yet without figures)."""
    stalled = {(s.topic, s.partition, s.offset): s for s in stats.stalled}
    paused = set(stats.paused_partitions)
    series = history.partition_series()
    figures = {(p.topic, p.partition): p for p in backlog.partitions}
    rows = []
    for pid in sorted(set(stats.assigned) | set(figures)):
        p = figures.get(pid)
        trend = trends.get(pid)
        stuck = any(at[:2] == pid for at in stalled)  # its backlog will not clear as it is
        row: dict[str, Any] = {
            "topic": pid[0],
            "partition": pid[1],
            "committed": stats.committed.get(pid) if p is None else p.committed,
            "end": None if p is None else p.end,
            "lag": None if p is None else p.lag,
            "backlog": None if p is None else p.backlog,
            "gaps": None if p is None else p.finished_runs,
            "oldest_seconds": round(stats.oldest_by_partition.get(pid, 0.0), 3),
            "blocking_offset": None if p is None else p.first_unfinished,
            "done_rate": None if trend is None else round(trend.done_rate, 3),
            "trend": None if trend is None else round(trend.trend, 3),
            "time_to_clear": None if stuck or trend is None else _rounded(trend.time_to_clear),
            "paused": pid in paused,
            "stalled": stuck,
            "series": series.get(pid, []),
        }
        if keys:
            blocking = None if p is None else p.first_unfinished
            stall = None if blocking is None else stalled.get((*pid, blocking))
            row["blocking_key"] = None if stall is None else as_json(stall.key, keys)
        rows.append(row)
    return rows


def options_of(consumer: Consumer) -> list[ConfigRow]:
    """A consumer's options as config rows (origin ``code``: given to ``Consumer``)."""
    rows = []
    for each in dataclasses.fields(consumer.config):
        if "option" not in each.metadata:
            continue
        value = getattr(consumer.config, each.name)
        shown = value.value if isinstance(value, enum.Enum) else value
        text = shown if isinstance(shown, str) else repr(shown)
        rows.append((each.name, text[:200], "code"))
    return rows


def resident_bytes(pid: int) -> int | None:
    """The resident memory of process ``pid`` (Linux's /proc; ``None`` elsewhere or gone)."""
    try:
        with open(f"/proc/{pid}/statm", encoding="ascii") as statm:
            return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return None


def _rounded(value: float | None) -> float | None:
    return None if value is None else round(value, 1)
