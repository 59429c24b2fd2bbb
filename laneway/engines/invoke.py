"""Running a handler on a run of messages, with retries, and reporting Failures.

The thread, async and sync engines execute handlers through these two functions;
what counts as a failure and how it is retried is decided in :mod:`laneway.retry`.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections import deque
from collections.abc import Awaitable, Callable

from laneway.engines.base import Completions
from laneway.retry import (
    Interrupted,
    RetryPolicy,
    aborts,
    call_async,
    refuse_awaitable,
    retry,
    retry_async,
)
from laneway.types import Failure, Message

SyncHandler = Callable[[Message], object]
AsyncHandler = Callable[[Message], Awaitable[object]]

REPORT_EVERY = 0.005
"""Seconds between progress reports within one run. A run can hold hundreds of messages
of a slow lane; reporting only at its end would keep finished messages counted against
``max_buffered`` (so nothing new is fetched for the other lanes) and uncommitted for the
whole run. One clock read per message is the price (~50 ns)."""


class _Progress:
    """The finished and failed messages of one run, reported to ``completions`` at least
    every ``REPORT_EVERY`` seconds (by :meth:`tick`) and at the end (:meth:`flush`)."""

    __slots__ = ("_completions", "_report_at", "done", "failed")

    def __init__(self, completions: Completions) -> None:
        self._completions = completions
        self.done: list[Message] = []
        self.failed: list[Failure] = []
        self._report_at = time.monotonic() + REPORT_EVERY

    def tick(self) -> None:
        if time.monotonic() >= self._report_at:
            self.flush()
            self._report_at = time.monotonic() + REPORT_EVERY

    def flush(self) -> None:
        self._completions.report(self.done, self.failed)
        self.done, self.failed = [], []


def run_sync(
    handler: SyncHandler,
    run: deque[Message],
    policy: RetryPolicy,
    stop: threading.Event,
    completions: Completions,
) -> None:
    """Run ``handler`` on the messages popped from ``run`` until it is empty.

    Finished and failed messages are reported to ``completions`` every ``REPORT_EVERY``
    seconds and when the run ends (also when an abort propagates). The run is consumed
    with ``popleft`` so another thread may steal its tail (a revocation does this); each
    message is run by exactly one side. Once ``stop`` is set, the rest of the run, and a
    message whose retry backoff the stop cut short, are put back unstarted (and not
    reported).
    """
    progress = _Progress(completions)
    wait = _waiter(stop)
    try:
        while run:
            if stop.is_set():
                break
            try:
                message = run.popleft()
            except IndexError:
                break
            try:
                result = handler(message)
                if result is not None:
                    refuse_awaitable(result)
            except BaseException as first_error:
                if aborts(first_error):
                    raise
                try:
                    error = retry(handler, message, policy, wait, first_error)
                except Interrupted:
                    run.appendleft(message)
                    break
                if error is None:
                    progress.done.append(message)
                else:
                    progress.failed.append(Failure(message, *error))
            else:
                progress.done.append(message)
            progress.tick()
    finally:
        progress.flush()


async def run_async(
    handler: AsyncHandler, run: deque[Message], policy: RetryPolicy, completions: Completions
) -> None:
    """The coroutine twin of :func:`run_sync` (cancellation puts the message back)."""
    progress = _Progress(completions)
    inline = policy.timeout is None
    try:
        while run:
            message = run.popleft()
            try:
                if inline:
                    try:
                        await handler(message)
                    except asyncio.CancelledError:
                        raise
                    except BaseException as first_error:
                        error = await retry_async(handler, message, policy, first_error)
                    else:
                        error = None
                else:
                    error = await call_async(handler, message, policy)
            except BaseException:
                run.appendleft(message)
                raise
            if error is None:
                progress.done.append(message)
            else:
                progress.failed.append(Failure(message, *error))
            progress.tick()
    finally:
        progress.flush()


def _waiter(stop: threading.Event) -> Callable[[float], bool]:
    def wait(seconds: float) -> bool:
        return not stop.wait(seconds)

    return wait
