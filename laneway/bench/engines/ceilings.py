"""What the work itself allows on this machine, timed without laneway in the same run.

An engine's msg/s says as much about the machine as about laneway. On a shared 2-core VM
the same sha256 loop ran anywhere from 1.1x to 2.1x faster in two processes than in one
within a few minutes, and ``asyncio.sleep(0.005)`` takes ~6 ms on asyncio's own loop but
~5.3 ms on uvloop. So for the scenarios whose bound is the work, the bench also times the
bare work, right before each repetition of the variant's engines:

* ``sleep``: ``keys`` lanes at once, each calling the work ``messages / keys`` times in a
  row: as ``keys`` threads (the thread engine's ceiling) and as ``keys`` coroutines on the
  event loop the async engine uses (the async engine's ceiling).
* ``cpu``: the work on ``messages / 4`` messages in this process (the ceiling of the
  baseline, and of the thread and async engines, which share the GIL), then split over
  one process per core (the process engine's ceiling).

Rows get ``ceiling_tps`` (the median over repetitions) and ``ratio_to_ceiling``.
"""

from __future__ import annotations

import asyncio
import os
import statistics
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from multiprocessing import get_context

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
        per_lane = max(1, scenario.messages // variant.keys)
        found = []
        if "thread" in engines:
            tps = threads(make_sync_work(spec), variant.keys, per_lane)
            found.append(Ceiling("thread", f"{variant.keys} threads", tps))
        if "async" in engines:
            tps = coroutines(make_async_work(spec), variant.keys, per_lane, event_loop)
            found.append(Ceiling("async", f"{variant.keys} coroutines", tps))
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


def threads(work: SyncWork, lanes: int, per_lane: int) -> float:
    """msg/s of ``lanes`` threads, each running ``work`` ``per_lane`` times in a row."""

    def lane(first: int) -> None:
        for i in range(first, first + per_lane):
            work(_message(i))

    pool = [threading.Thread(target=lane, args=(n * per_lane,)) for n in range(lanes)]
    started = time.perf_counter()
    for thread in pool:
        thread.start()
    for thread in pool:
        thread.join()
    return lanes * per_lane / (time.perf_counter() - started)


def coroutines(work: AsyncWork, lanes: int, per_lane: int, event_loop: EventLoop) -> float:
    """msg/s of ``lanes`` coroutines on a new ``event_loop``, each awaiting ``work``
    ``per_lane`` times in a row."""

    async def lane(first: int) -> None:
        for i in range(first, first + per_lane):
            await work(_message(i))

    async def all_lanes() -> float:
        started = time.perf_counter()
        await asyncio.gather(*(lane(n * per_lane) for n in range(lanes)))
        return time.perf_counter() - started

    loop = new_event_loop(event_loop)
    try:
        return lanes * per_lane / loop.run_until_complete(all_lanes())
    finally:
        loop.close()


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
