"""The thread engine: a pool of threads for blocking handlers."""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Collection, Hashable

from laneway.engines.base import Completions
from laneway.engines.invoke import SyncHandler, run_sync
from laneway.message import Message, PartitionId
from laneway.options import Ordering
from laneway.retry import RetryPolicy
from laneway.scheduling.lanes import UNORDERED_LANE, LaneScheduler, steal, steal_half


class ThreadEngine:
    """Runs a blocking handler on ``concurrency`` threads, lane by lane.

    Each idle thread claims a *run* (consecutive messages of one lane, see
    :class:`~laneway.scheduling.lanes.LaneScheduler`) under one lock, runs it without
    the lock, and reports the whole run at once, so the lock is taken per run, not per
    message. Use it for handlers that block on I/O with libraries that have no asyncio
    API (database drivers, HTTP clients, file systems). Tuning: ``concurrency`` should
    cover the I/O you want overlapped (about throughput x latency); with
    ``ordering="key"`` more threads than busy keys buy nothing. For pure CPU work use the
    process engine: threads share the GIL.
    """

    def __init__(
        self,
        handler: SyncHandler,
        ordering: Ordering,
        concurrency: int,
        policy: RetryPolicy,
        max_run: int = 256,
    ) -> None:
        self._handler = handler
        self._policy = policy
        self._closed = threading.Event()
        self._concurrency = concurrency
        self._scheduler = LaneScheduler(ordering, concurrency, max_run)
        self._cond = threading.Condition()
        self._threads: list[threading.Thread] = []
        self._runs: dict[int, deque[Message]] = {}
        self._executing = 0
        self._completions = Completions()

    def start(self, completions: Completions) -> None:
        self._completions = completions
        for index in range(self._concurrency):
            thread = threading.Thread(
                target=self._work, args=(index,), name=f"laneway-thread-{index}", daemon=True
            )
            thread.start()
            self._threads.append(thread)

    def submit(self, messages: list[Message]) -> None:
        with self._cond:
            self._scheduler.add(messages)
            # One wake-up; each worker that claims while more is ready wakes the next, so
            # threads join as fast as work appears instead of all at once.
            self._cond.notify()

    def cancel(self, partitions: Collection[PartitionId]) -> list[Message]:
        wanted = set(partitions)
        with self._cond:
            dropped = self._scheduler.cancel(wanted)
            for run in self._runs.values():
                dropped.extend(steal(run, wanted, self._scheduler))
            self._cond.notify(self._scheduler.ready_lanes())
        return dropped

    @property
    def worker_restarts(self) -> int:
        return 0

    @property
    def in_flight(self) -> int:
        return self._executing

    def close(self, timeout: float) -> None:
        with self._cond:
            self._closed.set()
            for run in self._runs.values():
                run.clear()
            self._cond.notify_all()
        for thread in self._threads:
            thread.join(timeout)
        self._threads.clear()

    def _work(self, index: int) -> None:
        lane: Hashable | None = None
        run: deque[Message] = deque()
        cond = self._cond
        scheduler = self._scheduler
        while True:
            with cond:
                if lane is not None:
                    scheduler.release(lane)
                    self._executing -= 1
                    if not self._executing:
                        self._completions.wake()  # a drain waits for in_flight == 0
                    del self._runs[index]
                    lane = None
                while True:
                    if self._closed.is_set():
                        return
                    claim = scheduler.claim()
                    if claim is not None:
                        break
                    if not scheduler.ordered:
                        stolen = steal_half(self._runs.values())
                        if stolen:
                            claim = UNORDERED_LANE, stolen
                            break
                    cond.wait()
                lane, batch = claim
                run = deque(batch)
                self._runs[index] = run
                self._executing += 1
                if scheduler.has_ready():
                    cond.notify()
            run_sync(self._handler, run, self._policy, self._closed, self._completions)
