"""What the work itself allows on this machine, timed without laneway in the same run.

An engine's msg/s says as much about the machine as about laneway. On a shared 2-core VM
the same sha256 loop ran anywhere from 1.1x to 2.1x faster in two processes than in one
within a few minutes, and ``asyncio.sleep(0.005)`` takes ~6 ms on asyncio's own loop but
~5.3 ms on uvloop. So for the scenarios whose bound is the work, the bench also times the
bare work, right before each repetition of the variant's engines:

* ``sleep``: one lane per key at once, each calling the work as many times in a row as
  its key has messages (``messages / keys`` each with uniform keys; with ``zipf`` keys the
  hottest lane is far longer and bounds the run): as threads (the thread engine's
  ceiling) and as coroutines on the event loop the async engine uses (the async engine's
  ceiling).
* ``cpu``: the work on ``messages / 4`` messages in this process (the ceiling of the
  baseline, and of the thread and async engines, which share the GIL), then split over
  one process per core (the process engine's ceiling).

Rows get ``ceiling_tps`` (the median over repetitions) and ``ratio_to_ceiling``.
"""

from __future__ import annotations

import asyncio
import itertools
import os
import statistics
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from multiprocessing import get_context

from laneway.bench.engines.key_spread import lane_sizes
from laneway.bench.engines.scenarios import Scenario, Variant
from laneway.bench.engines.workloads import (
    AsyncWork,
    SyncWork,
    WorkSpec,
    encode_value,
    make_async_work,
    make_sync_work,
)
from laneway.engines.event_loops import new_event_loop
from laneway.options import EventLoop
from laneway.types import Message

Limits = dict[tuple[str, str], dict[str, "Ceiling"]]
"""Merged ceilings: ``(scenario, variant label) -> engine -> Ceiling``."""

CPU_SHARE = 4
"""The cpu ceiling runs ``messages / CPU_SHARE`` messages per measurement (ratios, not
totals, matter; the full backlog would double the scenario's runtime)."""


@dataclass(frozen=True)
class Ceiling:
    """The bare work's msg/s for one engine: ``how`` it was run, e.g. ``"100 threads"``."""

    engine: str
    how: str
    tps: float


def measure(
    scenario: Scenario, variant: Variant, engines: Sequence[str], event_loop: EventLoop
) -> list[Ceiling]:
    """The ceilings of ``engines`` for this scenario (none for scenarios not bound by work)."""
    spec = WorkSpec(scenario.work, scenario.work_ms / 1000.0, scenario.cpu_iterations)
    if scenario.work == "sleep":
        lanes = lane_sizes(scenario.messages, variant.keys, variant.spread)
        found = []
        if "thread" in engines:
            tps = threads(make_sync_work(spec), lanes)
            found.append(Ceiling("thread", f"{len(lanes)} threads", tps))
        if "async" in engines:
            tps = coroutines(make_async_work(spec), lanes, event_loop)
            found.append(Ceiling("async", f"{len(lanes)} coroutines", tps))
        return found
    if scenario.work == "cpu":
        count = max(1, scenario.messages // CPU_SHARE)
        work = make_sync_work(spec)
        alone = Ceiling("baseline", "1 process", in_this_process(work, count))
        found = [alone] + [Ceiling(e, "1 process", alone.tps) for e in ("thread", "async")]
        if "process" in engines:
            workers = os.cpu_count() or 1
            tps = processes(work, count, workers)
            found.append(Ceiling("process", f"{workers} processes", tps))
        return [c for c in found if c.engine in engines]
    return []


def merge(measured: Sequence[Sequence[Ceiling]]) -> dict[str, Ceiling]:
    """One ceiling per engine: the median msg/s over the repetitions."""
    by_engine: dict[str, list[Ceiling]] = {}
    for ceilings in measured:
        for ceiling in ceilings:
            by_engine.setdefault(ceiling.engine, []).append(ceiling)
    return {
        engine: Ceiling(engine, found[0].how, statistics.median(c.tps for c in found))
        for engine, found in by_engine.items()
    }


def _message(sequence: int) -> Message:
    return Message("ceiling", 0, sequence, None, encode_value(sequence))


def threads(work: SyncWork, lanes: Sequence[int]) -> float:
    """msg/s of one thread per lane, each running ``work`` as many times in a row as its
    lane's size."""

    def lane(first: int, size: int) -> None:
        for i in range(first, first + size):
            work(_message(i))

    starts = _starts(lanes)
    pool = [threading.Thread(target=lane, args=pair) for pair in zip(starts, lanes, strict=True)]
    started = time.perf_counter()
    for thread in pool:
        thread.start()
    for thread in pool:
        thread.join()
    return sum(lanes) / (time.perf_counter() - started)


def coroutines(work: AsyncWork, lanes: Sequence[int], event_loop: EventLoop) -> float:
    """msg/s of one coroutine per lane on a new ``event_loop``, each awaiting ``work`` as
    many times in a row as its lane's size."""

    async def lane(first: int, size: int) -> None:
        for i in range(first, first + size):
            await work(_message(i))

    async def all_lanes() -> float:
        started = time.perf_counter()
        starts = _starts(lanes)
        lanes_at = zip(starts, lanes, strict=True)
        await asyncio.gather(*(lane(first, size) for first, size in lanes_at))
        return time.perf_counter() - started

    loop = new_event_loop(event_loop)
    try:
        return sum(lanes) / loop.run_until_complete(all_lanes())
    finally:
        loop.close()


def _starts(lanes: Sequence[int]) -> list[int]:
    """The first sequence number of each lane: lanes take consecutive numbers."""
    return list(itertools.accumulate(lanes, initial=0))[:-1]


def in_this_process(work: SyncWork, count: int) -> float:
    """msg/s of ``work`` on ``count`` messages, one after the other, here."""
    return count / _run(work, 0, count)


def processes(work: SyncWork, count: int, workers: int) -> float:
    """msg/s of ``work`` on ``count`` messages split over ``workers`` spawned processes
    (timed from the first start signal to the last finish, start-up excluded)."""
    share = max(1, count // workers)
    with get_context("spawn").Pool(workers) as pool:
        pool.starmap(_run, [(work, 0, 1)] * workers)  # import and warm every worker
        started = time.perf_counter()
        pool.starmap(_run, [(work, n * share, share) for n in range(workers)])
        return share * workers / (time.perf_counter() - started)


def _run(work: SyncWork, first: int, count: int) -> float:
    started = time.perf_counter()
    for i in range(first, first + count):
        work(_message(i))
    return time.perf_counter() - started
