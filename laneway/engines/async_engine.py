"""The async engine: long-lived coroutines on an asyncio loop, for ``async def`` handlers."""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
import time
from collections import deque
from collections.abc import Callable, Collection
from typing import TypeVar

from laneway.engines.base import Completions, InFlight, read_while_changing
from laneway.engines.claims import (
    GIVE_BACK_AFTER,
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

T = TypeVar("T")

CALL_TIMEOUT = 30.0
"""Seconds the control thread waits for the loop thread to run a cancel or a start-up step."""
IDLE_CHECK = 0.1
"""Seconds between looks for slow claims while nothing runs (``GIVE_BACK_AFTER`` while
something does)."""


class AsyncEngine:
    """Runs an ``async def`` handler on ``concurrency`` long-lived worker coroutines.

    The control thread hands over whole batches (one ``call_soon_threadsafe`` per poll);
    worker coroutines claim lane runs from a :class:`LaneScheduler` owned by the loop and
    ``await`` the handler on each message in turn. There is no task, future or queue
    round trip per message, which is what lets trivial handlers reach hundreds of
    thousands of messages a second. While handlers are quick a worker claims the runs of
    several lanes at once (see :mod:`laneway.engines.claims`); a claim still running
    after ``GIVE_BACK_AFTER`` seconds gives its unstarted messages back, and what a
    worker finished before a call that has not returned is reported by the watcher, so a
    slow key never holds up the others. A worker whose call runs past ``stall_timeout``
    is replaced (see :mod:`laneway.engines.stalled_calls`): calls that never return
    cannot take every worker.

    The loop is the caller's when the consumer runs under ``run_async`` (handlers can
    share the application's clients), otherwise a private loop from ``loop_factory`` on
    its own thread (the consumer's ``event_loop`` option: uvloop when installed).
    Tuning: ``concurrency`` is how many handlers may be awaiting at once; for I/O of
    latency L and target throughput T use at least T x L (and, with ``ordering="key"``,
    it only helps up to the number of keys with work queued).
    """

    def __init__(
        self,
        invoker: Invoker,
        ordering: Ordering,
        concurrency: int,
        loop: asyncio.AbstractEventLoop | None = None,
        loop_factory: Callable[[], asyncio.AbstractEventLoop] = asyncio.new_event_loop,
        max_run: int = 256,
        batch_wait: float = 0.0,
        stall_timeout: float | None = None,
        null_keys: NullKeys = NullKeys.PARTITION,
    ) -> None:
        self._invoker = invoker
        self._batch_wait = batch_wait
        self._concurrency = concurrency
        self._scheduler = LaneScheduler(ordering, concurrency, max_run, null_keys)
        self._loop = loop
        self._loop_factory = loop_factory
        self._own_loop = loop is None
        self._thread: threading.Thread | None = None
        self._workers: list[asyncio.Task[None]] = []
        self._idle: deque[asyncio.Future[None]] = deque()
        self._claims: dict[int, Claim] = {}
        """What each working coroutine claimed (its run is what it has not started)."""
        self._cost = HandlerCost(max_run)
        self._watcher: asyncio.Task[None] | None = None
        self._slots = [InFlight() for _ in range(concurrency)]
        self._stalled = StalledCalls(concurrency, stall_timeout)
        self._executing = 0
        self._closing = False
        self._completions = Completions()
        self._inbox_lock = threading.Lock()
        self._inbox: list[Message] = []
        self._feed_pending = False
        self._opened = False

    def start(self, completions: Completions) -> None:
        self._completions = completions
        if self._loop is None:
            self._loop = self._loop_factory()
            self._thread = threading.Thread(
                target=self._loop.run_forever, name="laneway-async", daemon=True
            )
            self._thread.start()
        opening = self._invoker.lifecycle.open_async()
        asyncio.run_coroutine_threadsafe(opening, self._loop).result()
        self._opened = True
        self._call(self._spawn_workers, None)

    def submit(self, messages: list[Message]) -> None:
        assert self._loop is not None, "start() first"
        with self._inbox_lock:
            self._inbox.extend(messages)
            if self._feed_pending:
                return
            self._feed_pending = True
        # One cross-thread wake-up per loop turn, however many batches arrive meanwhile.
        self._loop.call_soon_threadsafe(self._feed_inbox)

    def _feed_inbox(self) -> None:
        with self._inbox_lock:
            messages, self._inbox = self._inbox, []
            self._feed_pending = False
        self._feed(messages)

    def cancel(self, partitions: Collection[PartitionId]) -> list[Message]:
        wanted = set(partitions)

        def cancel_in_loop() -> list[Message]:
            scheduler = self._scheduler
            dropped = scheduler.cancel(wanted)
            dropped += steal_claimed(self._claims.values(), wanted, scheduler)
            self._wake(self._scheduler.ready_lanes())
            return dropped

        return self._call(cancel_in_loop, [])

    @property
    def worker_restarts(self) -> int:
        return 0

    @property
    def in_flight(self) -> int:
        return self._executing

    def running(self) -> list[tuple[Message, float]]:
        return [item for slot in self._slots if (item := slot.snapshot()) is not None]

    def waiting_behind(self, messages: list[Message]) -> list[Waiting]:
        """Read from the stall watch's thread, not the loop's: a handler that blocks the
        loop is exactly what the watch reports (see
        :func:`~laneway.engines.base.read_while_changing`)."""

        def read() -> list[Waiting]:
            claims = list(self._claims.values())
            return [waiting_behind(m, self._scheduler, claims) for m in messages]

        return read_while_changing(read, [Waiting() for _ in messages])

    def close(self, timeout: float) -> None:
        loop = self._loop
        if loop is None or loop.is_closed():
            return
        if loop.is_running():
            future = asyncio.run_coroutine_threadsafe(self._shutdown(timeout), loop)
            try:
                future.result(timeout + 5.0)
            except concurrent.futures.TimeoutError:
                future.cancel()
        if self._own_loop:
            loop.call_soon_threadsafe(loop.stop)
            if self._thread is not None:
                self._thread.join(timeout + 5.0)
            if not loop.is_running():
                loop.close()
            self._loop = None

    def _call(self, function: Callable[[], T], otherwise: T) -> T:
        """Run ``function`` on the loop thread and return its result, or ``otherwise`` if
        the loop is gone or does not answer within ``CALL_TIMEOUT`` seconds."""
        loop = self._loop
        if loop is None or loop.is_closed():
            return otherwise
        if self._thread is not None and not self._thread.is_alive():
            return otherwise  # our loop's thread died (a handler's error escaped)
        if self._thread is None and not loop.is_running():
            return otherwise  # the caller's loop has stopped

        async def call() -> T:
            return function()

        future = asyncio.run_coroutine_threadsafe(call(), loop)
        try:
            return future.result(CALL_TIMEOUT)
        except concurrent.futures.TimeoutError:
            future.cancel()
            return otherwise

    def _spawn_workers(self) -> None:
        assert self._loop is not None
        for index in range(self._concurrency):
            self._start_worker(index)
        self._watcher = self._loop.create_task(self._watch(), name="laneway-async-watch")

    def _start_worker(self, index: int) -> None:
        """Start a worker coroutine at ``index`` (a new one, or a stalled call's replacement)."""
        assert self._loop is not None
        work = self._work if self._invoker.batch_size is None else self._work_batches
        if index >= len(self._slots):
            self._slots.append(InFlight())
        self._workers = [task for task in self._workers if not task.done()]
        self._workers.append(self._loop.create_task(work(index), name=f"laneway-async-{index}"))

    def _feed(self, messages: list[Message]) -> None:
        self._scheduler.add(messages)
        size = self._invoker.batch_size
        if size is None:
            self._wake(self._scheduler.ready_lanes())
        else:  # a worker filling a batch, and one per further full batch
            self._wake(1 + self._scheduler.ready_messages(size * 64) // size)

    def _wake(self, count: int) -> None:
        idle = self._idle
        while count > 0 and idle:
            future = idle.popleft()
            if not future.done():
                future.set_result(None)
                count -= 1

    async def _work(self, index: int) -> None:
        assert self._loop is not None
        loop = self._loop
        scheduler, cost = self._scheduler, self._cost
        completions = self._completions
        while not self._closing:
            claimed = scheduler.claim_lanes(cost.claim_size())
            if not claimed and not scheduler.ordered:
                stolen = steal_half(claim.run for claim in self._claims.values())
                claimed = [(UNORDERED_LANE, stolen)] if stolen else []
            if not claimed:
                future: asyncio.Future[None] = loop.create_future()
                self._idle.append(future)
                await future
                continue
            if scheduler.has_ready():
                self._wake(1)
            claim = self._claims[index] = Claim(claimed, time.monotonic())
            self._executing += 1
            try:
                await self._invoker.run_async(claim.run, completions, self._slots[index])
            finally:
                cost.record(time.monotonic() - claim.started, claim.ran())
                self._executing -= 1
                if not self._executing:
                    completions.wake()  # a drain waits for in_flight == 0
                del self._claims[index]
                scheduler.release_all(claim.lanes)
            if self._stalled.retire(index):
                self._wake(scheduler.ready_lanes())
                return

    async def _watch(self) -> None:
        """Give back the unstarted lanes of claims running ``GIVE_BACK_AFTER`` seconds or
        more (a slow message holds up only its own lane) and wake workers for them; report
        what workers finished before a call still running; replace stalled calls."""
        while not self._closing:
            await asyncio.sleep(GIVE_BACK_AFTER if self._executing else IDLE_CHECK)
            scheduler = self._scheduler
            now = time.monotonic()
            if scheduler.ordered and take_back_slow(self._claims.values(), scheduler, now):
                self._wake(scheduler.ready_lanes())
            hand_over_slow(self._slots, now)
            for index in self._stalled.replace(self._slots, now):
                self._start_worker(index)

    async def _shutdown(self, timeout: float) -> None:
        self._closing = True
        for claim in self._claims.values():
            claim.run.clear()
        if self._watcher is not None:
            self._watcher.cancel()
            self._watcher = None
        self._wake(len(self._idle))
        if self._workers:
            _, pending = await asyncio.wait(self._workers, timeout=timeout)
            for task in pending:
                task.cancel()
            if pending:
                await asyncio.wait(pending, timeout=1.0)
            self._workers.clear()
        if self._opened:
            self._opened = False
            await self._invoker.lifecycle.close_async()

    async def _work_batches(self, index: int) -> None:
        """A worker of a batch handler: claims batches across lanes, waiting up to
        ``batch_wait`` from the moment it sees work for a batch to fill."""
        size = self._invoker.batch_size
        assert size is not None and self._loop is not None
        loop, scheduler, completions = self._loop, self._scheduler, self._completions
        deadline: float | None = None
        while not self._closing:
            if not scheduler.has_ready():
                deadline = None
                await self._idle_for(None)
                continue
            now = loop.time()
            if deadline is None:
                deadline = now + self._batch_wait
            if now < deadline and scheduler.ready_messages(size) < size:
                await self._idle_for(deadline - now)
                continue
            claim = scheduler.claim_batch(size)
            if claim is None:
                continue
            deadline = None
            if scheduler.has_ready():
                self._wake(1)
            lanes, batch = claim
            self._executing += 1
            try:
                await self._invoker.run_batch_async(batch, completions, self._slots[index])
            finally:
                self._executing -= 1
                if not self._executing:
                    completions.wake()  # a drain waits for in_flight == 0
                scheduler.release_all(lanes)
                if scheduler.has_ready():
                    self._wake(1)
            if self._stalled.retire(index):
                return

    async def _idle_for(self, seconds: float | None) -> None:
        """Wait to be woken by new work, or for ``seconds`` (``None``: no limit)."""
        assert self._loop is not None
        future: asyncio.Future[None] = self._loop.create_future()
        self._idle.append(future)
        timer = None
        if seconds is not None:
            timer = self._loop.call_later(seconds, _resolve, future)
        try:
            await future
        finally:
            if timer is not None:
                timer.cancel()


def _resolve(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)
