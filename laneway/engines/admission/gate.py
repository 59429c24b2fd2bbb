"""The gate every message passes before its handler runs: ``max_rate`` and the adaptive
concurrency limit, in one place for every engine.

The :class:`~laneway.engines.invoker.Invoker` (the one place a handler is called) asks a
gate to :meth:`~ThreadGate.enter` before each message and tells it when the message
``leave``-s, with the seconds it took and whether an attempt failed. A thread engine's
workers (and the sync engine, and each process-engine worker) use a :class:`ThreadGate`;
the async engine's coroutines an :class:`AsyncGate`. Engines themselves know nothing of
limits: they keep ``concurrency`` workers, and the gate decides how many of them run a
handler at a time and how fast they start.

A message holds its admission through its retries (their backoff spaces them; they take
no token of their own), so a failing downstream sees fewer calls at once, not more. Time
spent waiting at the gate is not handler time: the stall watch, handler timings and
``handler_timeout`` start once the message is admitted.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections import deque
from dataclasses import dataclass, replace

from laneway.engines.admission.adaptive import AdaptiveLimit
from laneway.engines.admission.rate import TokenBucket

WAIT_SLICE = 0.05
"""Seconds a thread waiting for admission sleeps between looks at the stop flag."""


@dataclass(frozen=True)
class Limits:
    """What a gate enforces: ``max_rate`` messages a second (None: no cap) and, with
    ``adaptive`` set, an :class:`AdaptiveLimit` of at most ``concurrency`` handlers.
    Plain data, so the process engine can send it to its workers."""

    max_rate: float | None
    adaptive: bool
    concurrency: int

    @property
    def active(self) -> bool:
        """Whether there is anything to enforce (else no gate is built at all)."""
        return self.max_rate is not None or self.adaptive

    def shared_by(self, workers: int) -> Limits:
        """Each of ``workers`` separate gates' share, e.g. per process-engine worker."""
        rate = None if self.max_rate is None else self.max_rate / workers
        return replace(self, max_rate=rate)


class _Admission:
    """The counting both gates share: handlers admitted, the limit, the bucket."""

    def __init__(self, limits: Limits) -> None:
        self.limit = AdaptiveLimit(limits.concurrency) if limits.adaptive else None
        self.bucket = None if limits.max_rate is None else TokenBucket(limits.max_rate)
        self.held = 0

    def try_admit(self) -> bool:
        if self.limit is not None and self.held >= self.limit.admits:
            return False
        self.held += 1
        return True

    def book(self) -> float:
        """Seconds until the admitted message may start (its token's turn)."""
        return 0.0 if self.bucket is None else self.bucket.reserve(time.monotonic())

    def release(self, seconds: float | None, failed: bool) -> None:
        """An admitted message is done after ``seconds`` (None: it never ran)."""
        running = self.held
        self.held -= 1
        if self.limit is not None and seconds is not None:
            self.limit.sample(seconds, failed, running)

    @property
    def free(self) -> int:
        return 1 if self.limit is None else self.limit.admits - self.held


class ThreadGate:
    """The gate for threads: :meth:`enter` blocks until admitted and the rate allows."""

    def __init__(self, limits: Limits) -> None:
        self._admission = _Admission(limits)
        self._cond = threading.Condition()

    @property
    def limit(self) -> int | None:
        """The adaptive limit now (None when there is none)."""
        limit = self._admission.limit
        return None if limit is None else limit.admits

    def enter(self, stop: threading.Event) -> bool:
        """Wait for admission, then for the message's turn under ``max_rate``; False
        (and not admitted) when ``stop`` was set meanwhile."""
        admission = self._admission
        with self._cond:
            while not admission.try_admit():
                if stop.is_set():
                    return False
                self._cond.wait(WAIT_SLICE)
            delay = admission.book()
        if delay > 0 and stop.wait(delay):
            self.leave(None, False)
            return False
        return True

    def leave(self, seconds: float | None, failed: bool) -> None:
        """The admitted message is done after ``seconds`` in its handler (None: it did not
        run, e.g. it was taken back); ``failed``: an attempt raised."""
        with self._cond:
            self._admission.release(seconds, failed)
            free = self._admission.free
            if free > 0:
                self._cond.notify(free)


class AsyncGate:
    """The gate for coroutines of one event loop: :meth:`enter` awaits admission (first
    come, first served) and the message's turn under ``max_rate``."""

    def __init__(self, limits: Limits) -> None:
        self._admission = _Admission(limits)
        self._waiting: deque[asyncio.Future[None]] = deque()

    @property
    def limit(self) -> int | None:
        """The adaptive limit now (None when there is none)."""
        limit = self._admission.limit
        return None if limit is None else limit.admits

    async def enter(self) -> None:
        """Wait for admission and the rate; a cancelled wait leaves nothing admitted."""
        admission = self._admission
        if self._waiting or not admission.try_admit():
            future = asyncio.get_running_loop().create_future()
            self._waiting.append(future)
            try:
                await future  # admitted by whoever resolved it (see _hand_over)
            except asyncio.CancelledError:
                if future.done() and not future.cancelled():
                    self.leave(None, False)
                else:
                    self._waiting.remove(future)
                raise
        delay = admission.book()
        if delay > 0:
            try:
                await asyncio.sleep(delay)
            except asyncio.CancelledError:
                self.leave(None, False)
                raise

    def leave(self, seconds: float | None, failed: bool) -> None:
        """As :meth:`ThreadGate.leave`; call it on the loop's thread."""
        self._admission.release(seconds, failed)
        self._hand_over()

    def _hand_over(self) -> None:
        admission, waiting = self._admission, self._waiting
        while waiting and admission.try_admit():
            future = waiting.popleft()
            if future.done():  # its waiter was cancelled
                admission.held -= 1
                continue
            future.set_result(None)


def gate_for(limits: Limits, is_async: bool) -> ThreadGate | AsyncGate | None:
    """The gate enforcing ``limits`` for threads or for coroutines; None when there is
    nothing to enforce."""
    if not limits.active:
        return None
    return AsyncGate(limits) if is_async else ThreadGate(limits)
