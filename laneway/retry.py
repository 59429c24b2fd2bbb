"""Retrying a failing handler: the policy, and the one place that decides what a failure is.

Every engine runs a handler through :func:`call` (or :func:`call_async`): any exception,
``BaseException`` subclasses included, is a failed attempt, and so is a return value the
caller's check refuses (:func:`laneway.results.records_of`); after ``max_retries``
retries the message is given up and reported as a :class:`~laneway.types.Failure`
(then dead-lettered). The lane of the message waits during the backoff, so its order
holds; other lanes go on.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import logging
import os
import random
import sys
import threading
import time
import traceback
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Generic, TypeVar

from laneway.logs import get_logger
from laneway.types import Message

T = TypeVar("T")

log = get_logger(__name__)

MAX_ERROR_TEXT = 4_000
"""Error texts are cut to this many characters (they travel in headers and pipes)."""

MAX_TRACEBACK_TEXT = 4_000
"""Tracebacks are cut to their last this many characters (the innermost frames and the
error are at the end)."""

ErrorInfo = tuple[str, str, int, str]
"""How a message failed for good: ``(error type name, error text, attempts, traceback)``."""
Outcome = tuple[ErrorInfo | None, int, T | None]
"""What retrying a message (or a batch) came to: how it failed (``None``: it succeeded in
the end), how many attempts were made, and the checked return value of the attempt that
succeeded (``None`` when none did)."""
Item = Message | list[Message]
"""What a handler is called with: a message, or a batch of them (``batch_size``)."""
Check = Callable[[object], T]
"""Turns a handler's return value into what its caller needs; raises ``TypeError`` for a
value that is not allowed."""


class Interrupted(Exception):
    """A backoff was cut short by a stop; the message is left unfinished."""


@dataclass(frozen=True)
class RetryPolicy:
    """How often and how patiently a failing handler is retried.

    ``max_retries``: retries after the first attempt (0: run once, never retried —
    the message still counts as failed and is dead-lettered, never silently committed).
    ``backoff``: the first delay in seconds; each retry doubles it up to
    ``backoff_max``, and the delay actually slept is drawn uniformly from half of it to
    all of it (jitter, so many failing keys don't retry in lockstep). ``timeout``:
    seconds one attempt may take (``None``: no limit); see ``Consumer``'s
    ``handler_timeout`` for what each engine does when it passes.
    ``poison_threshold``: final failures of one key after which its messages are no longer
    run for ``poison_cooldown`` seconds (``None``: never; see
    :class:`~laneway.engines.circuit.KeyCircuitBreaker`).

    Tuning: retries hold the key's lane, so a long backoff delays that key's later
    messages (never other keys'). Keep ``max_retries * backoff_max`` well under the
    consumer's ``drain_timeout`` if you want revocations to wait for retries.
    """

    max_retries: int = 3
    backoff: float = 0.1
    backoff_max: float = 5.0
    timeout: float | None = None
    poison_threshold: int | None = None
    poison_cooldown: float = 30.0

    def delay(self, failed_attempts: int) -> float:
        """Seconds to wait after the given number of failed attempts (1-based)."""
        ceiling = min(self.backoff_max, self.backoff * 2.0 ** min(failed_attempts - 1, 62))
        return float(ceiling * random.uniform(0.5, 1.0))


class RetryQueue(Generic[T]):
    """Items waiting out a retry backoff, handed back in the order they fall due.

    For work the control thread retries itself (dead-letter writes, ``on_failure``
    callbacks): :meth:`later` schedules an item after ``policy.delay(tries)`` seconds,
    :meth:`due` returns those whose time has come, with their try count. Not thread-safe.
    """

    def __init__(self) -> None:
        self._heap: list[tuple[float, int, T, int]] = []
        self._sequence = itertools.count()

    def __len__(self) -> int:
        return len(self._heap)

    def later(self, item: T, tries: int, policy: RetryPolicy) -> float:
        """Schedule ``item`` for its ``tries``-th retry; return the delay in seconds."""
        delay = policy.delay(tries)
        heapq.heappush(self._heap, (time.monotonic() + delay, next(self._sequence), item, tries))
        return delay

    def due(self) -> list[tuple[T, int]]:
        """Items due now, with the try count they were scheduled with."""
        heap = self._heap
        now = time.monotonic()
        ready: list[tuple[T, int]] = []
        while heap and heap[0][0] <= now:
            _, _, item, tries = heapq.heappop(heap)
            ready.append((item, tries))
        return ready


def aborts(error: BaseException) -> bool:
    """Whether a handler's exception stops the consumer instead of failing one message.

    Only ``KeyboardInterrupt`` in the main thread does (the sync engine running without
    signal handlers: Ctrl-C must still stop the program). Raised in a worker thread, a
    worker process or a coroutine it is a failure of that message, and not retried
    (it asks for a stop, it is not a transient error).
    """
    return isinstance(error, KeyboardInterrupt) and (
        threading.current_thread() is threading.main_thread()
    )


def describe(error: BaseException) -> tuple[str, str]:
    """The type name and bounded text of an exception, even if its ``__str__`` fails."""
    try:
        text = str(error)
    except Exception:
        text = f"<unprintable {type(error).__name__}>"
    return type(error).__name__, text[:MAX_ERROR_TEXT]


def formatted_traceback(error: BaseException) -> str:
    """``error``'s traceback as text, cut to its last ``MAX_TRACEBACK_TEXT`` characters,
    from the handler's frame on: the frames of laneway calling it (the engine, the retry,
    the decoding wrapper) come before and say nothing about the failure."""
    try:
        text = "".join(traceback.format_exception(type(error), error, _from_handler(error)))
    except Exception:
        text = f"<traceback of {type(error).__name__} could not be formatted>"
    return text[-MAX_TRACEBACK_TEXT:]


_PACKAGE = os.path.dirname(os.path.abspath(__file__)) + os.sep
_BENCH = os.path.join(_PACKAGE, "bench") + os.sep  # its handlers are handlers


def _from_handler(error: BaseException) -> TracebackType | None:
    """``error``'s traceback without its leading laneway frames (all of it when every
    frame is laneway's: a failure of laneway's own)."""
    first = tb = error.__traceback__
    while tb is not None:
        filename = tb.tb_frame.f_code.co_filename
        if not filename.startswith(_PACKAGE) or filename.startswith(_BENCH):
            return tb
        tb = tb.tb_next
    return first


def unchained(error: BaseException, first: BaseException) -> BaseException:
    """``error`` without the implicit link to ``first``, the first attempt's exception.

    Retries run while the first attempt's exception is being handled, so Python chains
    it to each later attempt's exception (``__context__``), and a dead letter's traceback
    would show the first failure, "During handling of the above exception, another
    exception occurred", then the last: the same error twice. A retry is not caused by
    the failure before it, so that link is cut; a handler's own chains stay."""
    link: BaseException | None = error
    seen: set[int] = set()
    while link is not None and id(link) not in seen:
        seen.add(id(link))
        if link.__context__ is first:
            link.__context__ = None
            break
        link = link.__cause__ or link.__context__
    return error


def failed_for_good(error: BaseException, attempts: int) -> ErrorInfo:
    """The :data:`ErrorInfo` of a message whose last attempt raised ``error``."""
    return (*describe(error), attempts, formatted_traceback(error))


def call(
    handler: Callable[[Any], object],
    item: Item,
    policy: RetryPolicy,
    wait: Callable[[float], bool],
    check: Check[T],
) -> Outcome[T]:
    """Run ``handler`` with retries: ``(None, attempts, value)`` once it returned (``value``
    is what ``check`` made of its return value), else how it failed.

    ``item`` is a message, or a list of them for a batch handler. ``check`` turns the
    handler's return value into what the caller needs, raising ``TypeError`` for a value
    that is not allowed (an awaitable, say), which fails the attempt like any error.
    ``wait(seconds)`` sleeps between attempts and returns False when a stop cut it short,
    in which case :class:`Interrupted` is raised. Only a Ctrl-C in the main thread
    (:func:`aborts`) propagates; anything else a handler raises fails the item.
    """
    try:
        value = check(handler(item))
    except BaseException as error:
        if aborts(error):
            raise
        return retry(handler, item, policy, wait, check, error)
    return None, 1, value


def retry(
    handler: Callable[[Any], object],
    item: Item,
    policy: RetryPolicy,
    wait: Callable[[float], bool],
    check: Check[T],
    error: BaseException,
) -> Outcome[T]:
    """The first attempt raised ``error``: retry as the policy says (see :func:`call`).

    Engines make the first attempt inline, so a handler that succeeds costs no extra
    call, and come here only when it raised.
    """
    attempts = 1
    first = error
    while attempts <= policy.max_retries and not isinstance(error, KeyboardInterrupt):
        delay = policy.delay(attempts)
        log_retry(item, attempts, error, delay)
        if not wait(delay):
            raise Interrupted
        attempts += 1
        try:
            value = check(handler(item))
        except BaseException as next_error:
            if aborts(next_error):
                raise
            error = unchained(next_error, first)
        else:
            return None, attempts, value
    return failed_for_good(error, attempts), attempts, None


async def call_async(
    handler: Callable[[Any], Awaitable[object]],
    item: Item,
    policy: RetryPolicy,
    check: Check[T],
) -> Outcome[T]:
    """The coroutine twin of :func:`call`; ``policy.timeout`` bounds each attempt."""
    try:
        value = check(await _attempt(handler, item, policy.timeout))
    except asyncio.CancelledError:
        raise
    except BaseException as error:
        return await retry_async(handler, item, policy, check, error)
    return None, 1, value


async def retry_async(
    handler: Callable[[Any], Awaitable[object]],
    item: Item,
    policy: RetryPolicy,
    check: Check[T],
    error: BaseException,
) -> Outcome[T]:
    """The coroutine twin of :func:`retry`."""
    attempts = 1
    first = error
    while attempts <= policy.max_retries and not isinstance(error, KeyboardInterrupt):
        delay = policy.delay(attempts)
        log_retry(item, attempts, error, delay)
        await sleep_at_least(delay)
        attempts += 1
        try:
            value = check(await _attempt(handler, item, policy.timeout))
        except asyncio.CancelledError:
            raise
        except BaseException as next_error:
            error = unchained(next_error, first)
        else:
            return None, attempts, value
    return failed_for_good(error, attempts), attempts, None


async def sleep_at_least(seconds: float) -> None:
    """``asyncio.sleep`` that never returns early. uvloop keeps timers in whole
    milliseconds against a loop clock read at the start of each loop turn, so a 100.4 ms
    sleep can end after 99.5 ms by ``time.monotonic``; a backoff must not be shorter than
    the one drawn."""
    deadline = time.monotonic() + seconds
    await asyncio.sleep(seconds)
    while (left := deadline - time.monotonic()) > 0:
        await asyncio.sleep(left)


async def _attempt(
    handler: Callable[[Any], Awaitable[object]], item: Item, timeout: float | None
) -> object:
    """One attempt; past ``timeout`` it is cancelled and fails with a TimeoutError saying so
    (a TimeoutError the handler raises itself passes through as it is)."""
    if timeout is None:
        return await handler(item)
    if sys.version_info >= (3, 11):
        scope = asyncio.timeout(timeout)
        try:
            async with scope:
                return await handler(item)
        except TimeoutError:
            if scope.expired():
                raise TimeoutError(timed_out(timeout)) from None
            raise
    else:
        try:
            return await asyncio.wait_for(handler(item), timeout)
        except asyncio.TimeoutError:
            raise TimeoutError(timed_out(timeout)) from None


def timed_out(timeout: float) -> str:
    """The text of a TimeoutError for an attempt that ran past ``handler_timeout``."""
    return f"the handler did not finish within {timeout:g} s"


def log_retry(item: Item, attempt: int, error: BaseException, delay: float) -> None:
    """Log a failed attempt that will be retried (DEBUG, with its traceback)."""
    if log.isEnabledFor(logging.DEBUG):
        first = item[0] if isinstance(item, list) else item
        what = f"a batch of {len(item)} from " if isinstance(item, list) else ""
        log.debug(
            "attempt %d on %s%s[%d]@%d failed: %s: %s; retrying in %.3f s",
            attempt,
            what,
            first.topic,
            first.partition,
            first.offset,
            *describe(error),
            delay,
            exc_info=error,
        )
