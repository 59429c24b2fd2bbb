"""Running a handler on a run of messages, with retries, and reporting Failures.

The thread, async and sync engines execute handlers through these two functions;
what counts as a failure and how it is retried is decided in :mod:`laneway.retry`.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Awaitable, Callable

from laneway.engines.base import Failure
from laneway.message import Message
from laneway.retry import Interrupted, RetryPolicy, call, call_async

SyncHandler = Callable[[Message], object]
AsyncHandler = Callable[[Message], Awaitable[object]]


def run_sync(
    handler: SyncHandler,
    run: deque[Message],
    policy: RetryPolicy,
    stop: threading.Event,
) -> tuple[list[Message], list[Failure]]:
    """Run ``handler`` on the messages popped from ``run`` until it is empty.

    The run is consumed with ``popleft`` so another thread may steal its tail (a
    revocation does this); each message is run by exactly one side. Once ``stop`` is
    set, the rest of the run, and a message whose retry backoff the stop cut short, are
    put back unstarted (and not reported).
    """
    done: list[Message] = []
    failed: list[Failure] = []
    wait = _waiter(stop)
    while run:
        if stop.is_set():
            break
        try:
            message = run.popleft()
        except IndexError:
            break
        try:
            error = call(handler, message, policy, wait)
        except Interrupted:
            run.appendleft(message)
            break
        if error is None:
            done.append(message)
        else:
            failed.append(Failure(message, *error))
    return done, failed


async def run_async(
    handler: AsyncHandler, run: deque[Message], policy: RetryPolicy
) -> tuple[list[Message], list[Failure]]:
    """The coroutine twin of :func:`run_sync` (cancellation puts the message back)."""
    done: list[Message] = []
    failed: list[Failure] = []
    while run:
        message = run.popleft()
        try:
            error = await call_async(handler, message, policy)
        except BaseException:
            run.appendleft(message)
            raise
        if error is None:
            done.append(message)
        else:
            failed.append(Failure(message, *error))
    return done, failed


def _waiter(stop: threading.Event) -> Callable[[float], bool]:
    def wait(seconds: float) -> bool:
        return not stop.wait(seconds)

    return wait
