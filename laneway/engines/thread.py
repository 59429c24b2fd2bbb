"""The thread engine: a pool of threads for blocking handlers."""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Collection, Hashable

from laneway.engines.base import Completions, InFlight
from laneway.engines.claims import (
    Claim,
    HandlerCost,
    steal_claimed,
    take_back_slow,
    waiting_behind,
)
from laneway.engines.invoker import Invoker
from laneway.engines.lanes import UNORDERED_LANE, LaneScheduler, steal_half
from laneway.engines.run_report import hand_over_slow
from laneway.engines.stalled_calls import StalledCalls
from laneway.options import NullKeys, Ordering
from laneway.types import Message, PartitionId, Waiting

WORK_PER_WORKER = 0.005
"""Seconds of queued work per running thread above which another thread is woken (so
under light load a message may wait about this long for a thread already running)."""
STALL_CHECK = 0.005
"""Seconds between checks for ready lanes that no running thread gets to (all of them are
inside long handler calls): then one more thread is woken."""
IDLE_CHECK = 0.1
"""Seconds between those checks while nothing is queued or running."""


def threads_to_wake(queued: int, ready: int, running: int, idle: int, cost: float | None) -> int:
    """How many of ``idle`` threads to wake for ``ready`` lanes holding ``queued`` messages
    of ``cost`` seconds each (``None``: not measured yet, assume slow handlers), with
    ``running`` threads at work: enough for ``WORK_PER_WORKER`` seconds of queued work
    per running thread, at least one if none runs."""
    limit = min(ready, idle)
    if cost is None:
        return limit
    wanted = max(1, math.ceil(queued * cost / WORK_PER_WORKER))
    return max(0, min(wanted - running, limit))


class ThreadEngine:
    """Runs a blocking handler on ``concurrency`` threads, lane by lane.

    Each idle thread claims a *run* (consecutive messages of one lane, see
    :class:`~laneway.engines.lanes.LaneScheduler`) under one lock, runs it without
    the lock, and reports the whole run at once, so the lock is taken per run, not per
    message. While handlers are quick one claim takes the runs of several lanes, about
    1 ms of work (see :mod:`laneway.engines.claims`): with many keys a lane's run is a
    message or two. Use it for handlers that block on I/O with libraries that have no
    asyncio API (database drivers, HTTP clients, file systems). Tuning: ``concurrency`` should
    cover the I/O you want overlapped (about throughput x latency); with
    ``ordering="key"`` more threads than busy keys buy nothing. For pure CPU work use the
    process engine: threads share the GIL.

    Threads are woken as the queued work needs them, not all at once: the engine keeps a
    low estimate of handler time per message over recent runs, and wakes another thread
    only while the queued messages would take more than ``WORK_PER_WORKER`` seconds per
    running thread (:func:`threads_to_wake`). Blocking handlers therefore get every
    thread they have lanes for, while near-instant handlers are run by the threads
    already awake, going from lane to lane (waking a thread for each of a hundred ready
    lanes, to run a dozen messages each, spent more time handing the GIL around than
    running handlers: 12-17% of the trivial Kafka benchmark). A watcher wakes one more
    thread whenever lanes are ready but no thread has claimed one for ``STALL_CHECK``
    seconds; it gives back the unstarted lanes of a claim running longer than
    :data:`~laneway.engines.claims.GIVE_BACK_AFTER` and reports what a thread finished
    before a call that has not returned since (:func:`~laneway.engines.run_report.hand_over_slow`),
    so a slow key never holds up the others; and it replaces a thread whose call has run
    past ``stall_timeout`` (see :mod:`laneway.engines.stalled_calls`), so that calls that
    never return cannot take every thread.
    """

    def __init__(
        self,
        invoker: Invoker,
        ordering: Ordering,
        concurrency: int,
        max_run: int = 256,
        batch_wait: float = 0.0,
        stall_timeout: float | None = None,
        null_keys: NullKeys = NullKeys.PARTITION,
    ) -> None:
        self._invoker = invoker
        self._batch_wait = batch_wait
        self._closed = threading.Event()
        self._concurrency = concurrency
        self._scheduler = LaneScheduler(ordering, concurrency, max_run, null_keys)
        self._cond = threading.Condition()
        self._threads: list[threading.Thread] = []
        self._claims: dict[int, Claim] = {}
        """What each working thread claimed (its run is what it has not started)."""
        self._slots = [InFlight() for _ in range(concurrency)]
        self._stalled = StalledCalls(concurrency, stall_timeout)
        self._started = False
        self._executing = 0
        self._cost = HandlerCost(max_run)
        self._last_claim = 0.0
        self._completions = Completions()

    def start(self, completions: Completions) -> None:
        self._invoker.lifecycle.open_now()
        self._started = True
        self._completions = completions
        for index in range(self._concurrency):
            self._start_worker(index)
        watcher = threading.Thread(target=self._watch, name="laneway-thread-watch", daemon=True)
        watcher.start()
        self._threads.append(watcher)

    def submit(self, messages: list[Message]) -> None:
        with self._cond:
            self._scheduler.add(messages)
            size = self._invoker.batch_size
            if size is None:
                self._cond.notify(self._threads_to_wake())
            else:  # a thread filling a batch, and one per further full batch
                self._cond.notify(1 + self._scheduler.ready_messages(size * 64) // size)

    def cancel(self, partitions: Collection[PartitionId]) -> list[Message]:
        wanted = set(partitions)
        with self._cond:
            scheduler = self._scheduler
            dropped = scheduler.cancel(wanted)
            dropped += steal_claimed(self._claims.values(), wanted, scheduler)
            self._cond.notify(self._scheduler.ready_lanes())
        return dropped

    @property
    def worker_restarts(self) -> int:
        return 0

    @property
    def in_flight(self) -> int:
        return self._executing

    def running(self) -> list[tuple[Message, float]]:
        return [item for slot in self._slots if (item := slot.snapshot()) is not None]

    def waiting_behind(self, messages: list[Message]) -> list[Waiting]:
        with self._cond:
            claims = list(self._claims.values())
            return [waiting_behind(m, self._scheduler, claims) for m in messages]

    def close(self, timeout: float) -> None:
        with self._cond:
            self._closed.set()
            for claim in self._claims.values():
                claim.run.clear()
            self._cond.notify_all()
        deadline = time.monotonic() + timeout
        for thread in self._threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        self._threads.clear()
        if self._started:
            self._started = False
            self._invoker.lifecycle.close_now()

    def _start_worker(self, index: int) -> None:
        """Start a worker thread at ``index`` (a new one, or a stalled call's replacement)."""
        work = self._work if self._invoker.batch_size is None else self._work_batches
        thread = threading.Thread(
            target=work, args=(index,), name=f"laneway-thread-{index}", daemon=True
        )
        if index >= len(self._slots):
            self._slots.append(InFlight())
        thread.start()
        self._threads.append(thread)

    def _threads_to_wake(self) -> int:
        scheduler = self._scheduler
        working = self._executing - self._stalled.count
        return threads_to_wake(
            scheduler.queued,
            scheduler.ready_lanes(),
            working,
            self._concurrency - working,
            self._cost.low,
        )

    def _watch(self) -> None:
        while not self._closed.wait(
            STALL_CHECK if self._executing or self._scheduler.queued else IDLE_CHECK
        ):
            with self._cond:
                if self._closed.is_set():
                    return
                now = time.monotonic()
                scheduler = self._scheduler
                if scheduler.ordered and take_back_slow(self._claims.values(), scheduler, now):
                    self._cond.notify(scheduler.ready_lanes())
                hand_over_slow(self._slots, now)
                for index in self._stalled.replace(self._slots, now):
                    self._threads = [t for t in self._threads if t.is_alive()]
                    self._start_worker(index)
                stalled = now - self._last_claim >= STALL_CHECK
                if stalled and self._scheduler.has_ready():
                    self._cond.notify()

    def _work(self, index: int) -> None:
        claim: Claim | None = None
        cond, scheduler, cost = self._cond, self._scheduler, self._cost
        slot = self._slots[index]
        while True:
            with cond:
                if claim is not None:
                    cost.record(time.monotonic() - claim.started, claim.ran())
                    scheduler.release_all(claim.lanes)
                    self._finished_call()
                    del self._claims[index]
                    if self._stalled.retire(index):
                        cond.notify()  # its replacement may be waiting for its lanes
                        return
                while True:
                    if self._closed.is_set():
                        return
                    claimed = scheduler.claim_lanes(cost.claim_size())
                    if claimed:
                        break
                    if not scheduler.ordered:
                        stolen = steal_half(claim.run for claim in self._claims.values())
                        if stolen:
                            claimed = [(UNORDERED_LANE, stolen)]
                            break
                    cond.wait()
                now = self._last_claim = time.monotonic()
                claim = self._claims[index] = Claim(claimed, now)
                self._executing += 1
                if self._threads_to_wake():
                    cond.notify()  # e.g. a lane made ready again by a release
            self._invoker.run(claim.run, self._closed, self._completions, slot)

    def _work_batches(self, index: int) -> None:
        """A worker of a batch handler: claims batches across lanes (see
        :meth:`LaneScheduler.claim_batch`), waiting up to ``batch_wait`` from the moment it
        sees work for a batch to fill."""
        size = self._invoker.batch_size
        assert size is not None
        cond, scheduler, slot = self._cond, self._scheduler, self._slots[index]
        lanes: list[Hashable] = []
        while True:
            with cond:
                if lanes:
                    scheduler.release_all(lanes)
                    self._finished_call()
                    if scheduler.has_ready():
                        cond.notify()
                    if self._stalled.retire(index):
                        return
                claim = self._claim_batch(size)
                if claim is None:
                    return
                lanes, batch = claim
                self._executing += 1
                self._last_claim = time.monotonic()
            self._invoker.run_batch(batch, self._closed, self._completions, slot)

    def _finished_call(self) -> None:
        """A worker is done with its claim (call with the lock held)."""
        self._executing -= 1
        if not self._executing:
            self._completions.wake()  # a drain waits for in_flight == 0

    def _claim_batch(self, size: int) -> tuple[list[Hashable], list[Message]] | None:
        """Wait (holding the condition) for a batch worth claiming; ``None`` once closed."""
        cond, scheduler = self._cond, self._scheduler
        deadline: float | None = None
        while not self._closed.is_set():
            if not scheduler.has_ready():
                deadline = None
                cond.wait()
                continue
            now = time.monotonic()
            if deadline is None:
                deadline = now + self._batch_wait
            if now >= deadline or scheduler.ready_messages(size) >= size:
                claim = scheduler.claim_batch(size)
                if claim is not None:
                    return claim
            else:
                cond.wait(deadline - now)
        return None
