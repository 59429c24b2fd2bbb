"""Running a handler on a run of messages and turning exceptions into Failures.

Every engine executes handlers through these two functions, so what counts as a
failure is decided in one place: any exception, including ``BaseException`` subclasses
other than ``KeyboardInterrupt`` (which still aborts the worker it interrupts).
"""

from __future__ import annotations

import asyncio
import threading
from collections import deque
from collections.abc import Awaitable, Callable

from laneway.engines.base import Failure
from laneway.message import Message

SyncHandler = Callable[[Message], object]
AsyncHandler = Callable[[Message], Awaitable[object]]


def failure(message: Message, error: BaseException, attempts: int = 1) -> Failure:
    return Failure(message, type(error).__name__, str(error), attempts)


def run_sync(
    handler: SyncHandler, run: deque[Message], stop: threading.Event | None = None
) -> tuple[list[Message], list[Failure]]:
    """Run ``handler`` on the messages popped from ``run`` until it is empty.

    The run is consumed with ``popleft`` so another thread may steal its tail (a
    revocation does this); each message is run by exactly one side. When ``stop`` is
    set, the rest of the run is left unstarted (and unreported).
    """
    done: list[Message] = []
    failed: list[Failure] = []
    while run:
        if stop is not None and stop.is_set():
            break
        try:
            message = run.popleft()
        except IndexError:
            break
        try:
            handler(message)
        except KeyboardInterrupt:
            raise
        except BaseException as error:
            failed.append(failure(message, error))
        else:
            done.append(message)
    return done, failed


async def run_async(
    handler: AsyncHandler, run: deque[Message]
) -> tuple[list[Message], list[Failure]]:
    """The coroutine twin of :func:`run_sync`."""
    done: list[Message] = []
    failed: list[Failure] = []
    while run:
        message = run.popleft()
        try:
            await handler(message)
        except KeyboardInterrupt:
            raise
        except BaseException as error:
            if isinstance(error, asyncio.CancelledError):
                run.appendleft(message)
                raise
            failed.append(failure(message, error))
        else:
            done.append(message)
    return done, failed
