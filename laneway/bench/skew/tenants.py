"""Tenants served in turn: a quiet tenant's latency while another floods.

Records are written while the consumer runs, open loop, for ``seconds``: tenant B at
``quiet_rate`` a second over ``quiet_keys`` keys, and in the flood runs tenant A at
``flood_factor`` times that over ``flood_keys`` keys, each record ``work_ms`` of blocking
work for a thread-engine consumer. Three runs: B alone; B beside A's flood in fetch order;
B beside A's flood with ``fairness=Fairness(group_by=tenant)`` (equal weights). Latency
is from a record's write (its timestamp) to its handler's end, for B's records; the goal:
with fairness, B's p99 within 2x of its p99 alone, with no key run out of order.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Hashable
from dataclasses import asdict, dataclass
from typing import Any

from laneway.bench.engines.targets import Target, unique_name
from laneway.bench.skew.logs import SkewLog
from laneway.consumer import Consumer
from laneway.fairness import Fairness
from laneway.types import Message

GOAL = 2.0
"""B's p99 beside the flood, with fairness, over its p99 alone: at most this."""


@dataclass(frozen=True)
class TenantSettings:
    seconds: float = 8.0
    quiet_rate: float = 50.0
    flood_factor: float = 100.0
    quiet_keys: int = 20
    flood_keys: int = 500
    partitions: int = 8
    work_ms: float = 2.0
    concurrency: int = 64
    max_buffered: int = 10_000


@dataclass(frozen=True)
class TenantRow:
    run: str
    quiet_messages: int
    flood_messages: int
    quiet_p50_ms: float
    quiet_p99_ms: float
    flood_p99_ms: float
    order_ok: bool
    lost: int


def tenant(message: Message) -> Hashable:
    """The tenant of a bench record: its key's prefix before the first ``-``."""
    return (message.key or b"").split(b"-", 1)[0]


def run_tenants(target: Target, settings: TenantSettings) -> dict[str, Any]:
    rows = [
        _run(target, settings, "B alone", flood=False, fair=False),
        _run(target, settings, "B beside A, fetch order", flood=True, fair=False),
        _run(target, settings, "B beside A, fairness", flood=True, fair=True),
    ]
    alone = rows[0].quiet_p99_ms
    return {
        "settings": asdict(settings),
        "rows": [asdict(row) for row in rows],
        "fifo_ratio": rows[1].quiet_p99_ms / alone if alone else 0.0,
        "fair_ratio": rows[2].quiet_p99_ms / alone if alone else 0.0,
        "goal": GOAL,
        "valid": all(row.order_ok and row.lost == 0 for row in rows),
    }


def _run(target: Target, settings: TenantSettings, name: str, flood: bool, fair: bool) -> TenantRow:
    log = SkewLog(target, "tenants", settings.partitions)
    lock = threading.Lock()
    latencies: dict[bytes, list[float]] = {b"A": [], b"B": []}
    last: dict[bytes, int] = {}
    disorder = 0
    seen: Counter[int] = Counter()
    work = settings.work_ms / 1000

    def handle(message: Message) -> None:
        nonlocal disorder
        time.sleep(work)
        took = time.time() * 1000 - message.timestamp
        number = int(message.value or b"-1")
        with lock:
            seen[number] += 1
            latencies[tenant(message)].append(took)  # type: ignore[index]
            key = message.key or b""
            if last.get(key, -1) > number:
                disorder += 1
            last[key] = number

    consumer = Consumer(
        log.source(unique_name("laneway-bench-skew", "group")),
        handle,
        engine="thread",
        concurrency=settings.concurrency,
        max_buffered=settings.max_buffered,
        fairness=Fairness(group_by=tenant) if fair else None,
        handle_signals=False,
    )
    running = threading.Thread(target=consumer.run, name="skew-tenants", daemon=True)
    running.start()
    try:
        written = _write(log, settings, flood)
        deadline = time.monotonic() + 120
        while sum(seen.values()) < written and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        consumer.stop()
        running.join(60)
        log.close()
    quiet, loud = sorted(latencies[b"B"]), sorted(latencies[b"A"])
    return TenantRow(
        run=name,
        quiet_messages=len(quiet),
        flood_messages=len(loud),
        quiet_p50_ms=_percentile(quiet, 50),
        quiet_p99_ms=_percentile(quiet, 99),
        flood_p99_ms=_percentile(loud, 99),
        order_ok=disorder == 0,
        lost=written - len(seen),
    )


def _write(log: SkewLog, settings: TenantSettings, flood: bool) -> int:
    """Write B's records (and A's) open loop, in 10 ms ticks; how many were written."""
    tick = 0.01
    quiet_per_tick = settings.quiet_rate * tick
    loud_per_tick = quiet_per_tick * settings.flood_factor if flood else 0.0
    started = time.monotonic()
    written = 0
    owed_quiet = owed_loud = 0.0
    ticks = int(settings.seconds / tick)
    for number in range(ticks):
        owed_quiet += quiet_per_tick
        owed_loud += loud_per_tick
        batch: list[tuple[bytes, bytes]] = []
        while owed_quiet >= 1:
            batch.append((b"B-%d" % (written % settings.quiet_keys), b"%d" % written))
            written += 1
            owed_quiet -= 1
        while owed_loud >= 1:
            batch.append((b"A-%d" % (written % settings.flood_keys), b"%d" % written))
            written += 1
            owed_loud -= 1
        log.write(batch)
        time.sleep(max(0.0, started + (number + 1) * tick - time.monotonic()))
    log.flush()
    return written


def _percentile(values: list[float], percent: int) -> float:
    if not values:
        return 0.0
    return values[min(len(values) - 1, len(values) * percent // 100)]
