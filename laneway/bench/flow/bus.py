"""``laneway bench bus``: the embedded log as an in-process event bus, timed in microseconds.

Two measurements, both on an in-memory :class:`~laneway.EmbeddedLog` (8 partitions, 100
keys) with the producer in this thread and the consumer running in another:

* **latency** (per engine, ``sync`` and ``async`` by default): the producer writes at a
  steady ``rate`` for ``seconds`` (open loop: each message at its own time, never waiting
  for the consumer); each message carries ``time.perf_counter_ns()`` taken just before
  ``produce``, and the handler takes its own at its start. The figures are percentiles of
  that difference (produce -> handler start), in microseconds.
* **blocking** (``when_full="block"``): a log bounded to ``capacity`` records per partition,
  a slow consumer (``slow_ms`` of ``time.sleep`` per message, sync engine) and a producer
  that wants ``rate`` messages a second: how long each ``produce`` call waited for room, as
  percentiles, and how many waited at all. Room is made when the consumer commits (the
  log keeps a record until its group committed past it), so ``commit_interval`` decides
  how long producers wait in one go; both the default (1 s) and 0.05 s are shown.
"""

from __future__ import annotations

import struct
import threading
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from laneway.consumer import Consumer
from laneway.options import EngineKind
from laneway.sources.embedded.log import EmbeddedLog
from laneway.types import Message

PARTITIONS = 8
KEYS = 100
_STAMP = struct.Struct("<q")
PERCENTILES = (50.0, 99.0, 99.9)


@dataclass
class Latency:
    """Percentiles in microseconds of one timed series."""

    label: str
    count: int
    p50: float
    p99: float
    p999: float
    max: float
    extra: str = ""


def percentiles(label: str, values_ns: Sequence[int], extra: str = "") -> Latency:
    ordered = sorted(values_ns)
    if not ordered:
        return Latency(label, 0, 0.0, 0.0, 0.0, 0.0, extra)

    def at(p: float) -> float:
        index = min(len(ordered) - 1, round(p / 100.0 * (len(ordered) - 1)))
        return ordered[index] / 1000.0

    return Latency(label, len(ordered), at(50.0), at(99.0), at(99.9), ordered[-1] / 1000.0,
                   extra)  # fmt: skip


class _Stamps:
    """Handler start minus the producer's stamp, per message (one list, appended under the
    GIL from whichever thread runs the handler)."""

    def __init__(self) -> None:
        self.latencies: list[int] = []

    def record(self, message: Message) -> None:
        now = time.perf_counter_ns()
        self.latencies.append(now - _STAMP.unpack_from(message.value or bytes(8))[0])


class _SyncStamp(_Stamps):
    def __call__(self, message: Message) -> None:
        self.record(message)


class _AsyncStamp(_Stamps):
    async def __call__(self, message: Message) -> None:
        self.record(message)


class _SlowHandler:
    def __init__(self, seconds: float) -> None:
        self.seconds = seconds

    def __call__(self, message: Message) -> None:
        time.sleep(self.seconds)


def _paced(log: EmbeddedLog, rate: float, seconds: float) -> tuple[int, list[int]]:
    """Produce at ``rate`` for ``seconds``; return the count and each produce call's ns."""
    count = int(rate * seconds)
    interval = 1.0 / rate
    calls: list[int] = []
    keys = [b"k%d" % k for k in range(KEYS)]
    start = time.perf_counter()
    for i in range(count):
        due = start + i * interval
        wait = due - time.perf_counter()
        if wait > 0:
            time.sleep(wait)
        stamp = time.perf_counter_ns()
        log.produce("bus", _STAMP.pack(stamp), keys[i % KEYS])
        calls.append(time.perf_counter_ns() - stamp)
    return count, calls


def _consume_in_thread(consumer: Consumer, count: int) -> threading.Thread:
    thread = threading.Thread(
        target=consumer.run, kwargs={"max_messages": count, "idle_timeout": 30.0}, daemon=True
    )
    thread.start()
    return thread


def latency(engine: EngineKind, rate: float, seconds: float) -> Latency:
    """Produce -> handler start at a steady ``rate``, for ``engine``."""
    log = EmbeddedLog()
    log.create_topic("bus", partitions=PARTITIONS)
    handler: _AsyncStamp | _SyncStamp
    handler = _AsyncStamp() if engine is EngineKind.ASYNC else _SyncStamp()
    count = int(rate * seconds)
    consumer = Consumer(log.subscribe(["bus"], "bus"), handler, engine=engine,
                        handle_signals=False)  # fmt: skip
    thread = _consume_in_thread(consumer, count)
    time.sleep(0.5)  # the consumer has joined and waits for messages
    _paced(log, rate, seconds)
    thread.join(60.0)
    log.close()
    return percentiles(f"{engine.value} @ {rate:,.0f}/s", handler.latencies)


def blocking(
    rate: float, seconds: float, capacity: int, slow_ms: float, commit_interval: float
) -> Latency:
    """How long producers wait in ``produce`` with ``when_full="block"`` and a slow consumer."""
    log = EmbeddedLog(capacity=capacity, when_full="block")
    log.create_topic("bus", partitions=PARTITIONS)
    count = int(rate * seconds)
    consumer = Consumer(
        log.subscribe(["bus"], "bus"),
        _SlowHandler(slow_ms / 1000.0),
        engine="sync",
        commit_interval=commit_interval,
        handle_signals=False,
    )
    thread = _consume_in_thread(consumer, count)
    time.sleep(0.5)
    started = time.perf_counter()
    _, calls = _paced(log, rate, seconds)
    produce_s = time.perf_counter() - started
    consumer.stop()
    thread.join(60.0)
    blocked = log.stats().blocked
    log.close()
    waited = sum(calls) / 1e9
    extra = (
        f"{blocked:,} of {count:,} calls waited, {waited:.2f} s in all; producing took "
        f"{produce_s:.2f} s for {seconds:g} s of schedule"
    )
    return percentiles(f"block, commit every {commit_interval:g} s", calls, extra)


def measure(
    engines: Sequence[str] = ("sync", "async"),
    rate: float = 2_000.0,
    seconds: float = 5.0,
    capacity: int = 256,
    slow_ms: float = 1.0,
    block_rate: float = 2_000.0,
) -> dict[str, Any]:
    """Every figure of the module docstring, as a JSON-ready dict."""
    rows = [latency(EngineKind(engine), rate, seconds) for engine in engines]
    blocks = [
        blocking(block_rate, seconds, capacity, slow_ms, interval) for interval in (1.0, 0.05)
    ]
    return {
        "settings": {
            "rate": rate,
            "seconds": seconds,
            "partitions": PARTITIONS,
            "keys": KEYS,
            "capacity": capacity,
            "slow_ms": slow_ms,
            "block_rate": block_rate,
        },
        "latency_us": [asdict(row) for row in rows],
        "blocking_us": [asdict(row) for row in blocks],
    }


def print_report(console: Any, result: dict[str, Any]) -> None:
    from rich.table import Table

    settings = result["settings"]
    for key, title in (
        ("latency_us", "produce -> handler start, in-memory embedded log"),
        ("blocking_us", f"producer wait in produce(), when_full='block', capacity "
                        f"{settings['capacity']}/partition, consumer {settings['slow_ms']:g} ms "
                        f"per message, producer at {settings['block_rate']:,.0f}/s"),
    ):  # fmt: skip
        table = Table(title=title, header_style="bold")
        for name in ("run", "messages", "p50 us", "p99 us", "p99.9 us", "max us", ""):
            table.add_column(name, justify="left" if name in ("run", "") else "right")
        for row in result[key]:
            table.add_row(
                row["label"], f"{row['count']:,}", f"{row['p50']:,.0f}", f"{row['p99']:,.0f}",
                f"{row['p999']:,.0f}", f"{row['max']:,.0f}", row["extra"],
            )  # fmt: skip
        console.print(table)
