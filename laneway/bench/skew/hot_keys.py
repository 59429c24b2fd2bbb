"""Hot keys contained: what Zipf-skewed keys cost the cold keys, with and without the cap.

A backlog ``10 x max_buffered`` long whose keys follow a Zipf law (``s`` = 1.2: the hottest
key carries about a fifth of the messages) is consumed three times by a thread-engine
consumer of ``work_ms`` blocking work per message:

* **without hot keys**: only the messages of the keys outside the top 1 % (by count);
* **contained**: everything, ``max_buffered_per_key`` at its default;
* **uncontained**: everything, ``max_buffered_per_key = max_buffered`` (no cap: the hot
  keys' backlog may fill the buffer, as before the cap existed).

Per run: the *cold* keys' throughput (their messages over the time until the last of them
finished), every key's throughput over that same time (``all msg/s``: what the machine
gave the consumer while the cold keys ran; when it is the same in every run, the cold
keys lost only the CPU the hot keys' own messages took, not buffer room), the hottest
key's time against its own bound (its messages x ``work_ms``: it
runs one at a time), the peak of ``buffered_bytes`` against ``max_buffered_bytes``, the
messages held off and read again, and whether every message was handled once and in key
order. The goal: contained cold throughput >= 0.9 of the run without hot keys.
"""

from __future__ import annotations

import random
import threading
import time
from collections import Counter
from dataclasses import asdict, dataclass
from typing import Any

from laneway.bench.engines.targets import Target, unique_name
from laneway.bench.skew.logs import SkewLog
from laneway.consumer import Consumer
from laneway.types import Message

GOAL = 0.9
"""Cold keys' throughput, contained, as a share of theirs without the hot keys."""


@dataclass(frozen=True)
class HotKeySettings:
    messages: int = 20_000
    keys: int = 1_000
    exponent: float = 1.2
    partitions: int = 8
    work_ms: float = 2.0
    concurrency: int = 64
    max_buffered: int = 2_000
    timeout_s: float = 600.0


@dataclass(frozen=True)
class HotKeyRow:
    run: str
    messages: int
    cold_messages: int
    cold_tps: float
    all_tps: float
    hot_seconds: float
    hot_bound_seconds: float
    peak_buffered_bytes: int
    max_buffered_bytes: int
    held_off: int
    lost: int
    duplicates: int
    order_ok: bool


def zipf_keys(settings: HotKeySettings, seed: int = 1_206) -> list[int]:
    """The key rank of every message, drawn from a Zipf law of ``exponent``."""
    weights = [1.0 / (rank + 1) ** settings.exponent for rank in range(settings.keys)]
    return random.Random(seed).choices(range(settings.keys), weights, k=settings.messages)


def run_hot_keys(target: Target, settings: HotKeySettings) -> dict[str, Any]:
    """The three runs and their rows; ``ratio`` is contained / without hot keys."""
    ranks = zipf_keys(settings)
    counts = Counter(ranks)
    top = {rank for rank, _ in counts.most_common(max(1, settings.keys // 100))}
    hottest = counts.most_common(1)[0]
    everything = [(b"k%d" % rank, b"%d" % i) for i, rank in enumerate(ranks)]
    cold_only = [pair for pair, rank in zip(everything, ranks, strict=True) if rank not in top]
    rows = [
        _run(target, settings, "without hot keys", cold_only, top, hottest, None),
        _run(target, settings, "contained", everything, top, hottest, None),
        _run(target, settings, "uncontained", everything, top, hottest, settings.max_buffered),
    ]
    baseline = rows[0].cold_tps
    ratio = rows[1].cold_tps / baseline if baseline else 0.0
    before = rows[2].cold_tps / baseline if baseline else 0.0
    valid = all(row.lost == 0 and row.duplicates == 0 and row.order_ok for row in rows)
    return {
        "settings": asdict(settings),
        "rows": [asdict(row) for row in rows],
        "contained_ratio": ratio,
        "uncontained_ratio": before,
        "goal": GOAL,
        "valid": valid,
    }


def _run(
    target: Target,
    settings: HotKeySettings,
    name: str,
    records: list[tuple[bytes, bytes]],
    top: set[int],
    hottest: tuple[int, int],
    per_key: int | None,
) -> HotKeyRow:
    log = SkewLog(target, name.replace(" ", "-"), settings.partitions)
    try:
        log.write(records)
        log.flush()
        return _consume(log, settings, name, records, top, hottest, per_key)
    finally:
        log.close()


def _consume(
    log: SkewLog,
    settings: HotKeySettings,
    name: str,
    records: list[tuple[bytes, bytes]],
    top: set[int],
    hottest: tuple[int, int],
    per_key: int | None,
) -> HotKeyRow:
    hot_keys = {b"k%d" % rank for rank in top}
    hottest_key = b"k%d" % hottest[0]
    lock = threading.Lock()
    seen: Counter[int] = Counter()
    last: dict[bytes, int] = {}
    disorder = 0
    cold_done: list[float] = []
    hottest_done: list[float] = []
    every_done: list[float] = []
    work = settings.work_ms / 1000

    def handle(message: Message) -> None:
        nonlocal disorder
        time.sleep(work)
        number = int(message.value or b"-1")
        now = time.monotonic()
        with lock:
            seen[number] += 1
            every_done.append(now)
            key = message.key or b""
            if last.get(key, -1) > number:
                disorder += 1
            last[key] = number
            if key not in hot_keys:
                cold_done.append(now)
            elif key == hottest_key:
                hottest_done.append(now)

    options: dict[str, Any] = {}
    if per_key is not None:
        options["max_buffered_per_key"] = per_key
    consumer = Consumer(
        log.source(unique_name("laneway-bench-skew", "group")),
        handle,
        engine="thread",
        ordering="key",
        concurrency=settings.concurrency,
        max_buffered=settings.max_buffered,
        handle_signals=False,
        **options,
    )
    peak = 0
    stop = threading.Event()

    def watch() -> None:
        nonlocal peak
        while not stop.wait(0.05):
            peak = max(peak, consumer.stats().buffered_bytes)

    watcher = threading.Thread(target=watch, name="skew-peak", daemon=True)
    watcher.start()
    started = time.monotonic()
    try:
        stats = consumer.run(max_messages=len(records), idle_timeout=settings.timeout_s)
    finally:
        stop.set()
        watcher.join(5)
    cold = len(cold_done)
    cold_end = max(cold_done) if cold_done else started
    cold_seconds = cold_end - started
    meanwhile = sum(1 for at in every_done if at <= cold_end)
    hot_seconds = (max(hottest_done) - started) if hottest_done else 0.0
    return HotKeyRow(
        run=name,
        messages=len(records),
        cold_messages=cold,
        cold_tps=cold / cold_seconds if cold_seconds else 0.0,
        all_tps=meanwhile / cold_seconds if cold_seconds else 0.0,
        hot_seconds=hot_seconds,
        hot_bound_seconds=(hottest[1] * work) if hottest_done else 0.0,
        peak_buffered_bytes=peak,
        max_buffered_bytes=consumer.config.max_buffered_bytes,
        held_off=stats.held_off,
        lost=len(records) - len(seen),
        duplicates=sum(n - 1 for n in seen.values()),
        order_ok=disorder == 0,
    )
