"""The Invoker: the one place laneway calls a user's handler.

Every engine runs handlers through an :class:`Invoker`: the sync and thread engines with
:meth:`Invoker.run`, the async engine with :meth:`Invoker.run_async`, and each process
engine worker with :meth:`Invoker.run_rows`. What counts as a failure and how it is
retried is decided in :mod:`laneway.retry`; what is reported when, here.

*Attempt hooks* (:class:`AttemptHook`) wrap every attempt of the handler, retries
included: timing, tracing, or the process worker's timeout stamp. They are applied once,
when the invoker is built, so a consumer without hooks calls the user's function directly.

*Limits* (``max_rate``, ``concurrency_limit="adaptive"``) are a gate each message passes
before its handler runs (:mod:`laneway.limits.gate`): outside the attempt, so waiting there
counts neither as handler time nor against ``handler_timeout``. A message is taken from
its run before the wait, so that idle workers (which take over the unstarted tail of a
busy worker's run in unordered mode) cannot keep robbing the worker at the head of the
gate's queue. Without limits no gate exists and the loops below skip it.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections import deque
from collections.abc import Awaitable, Callable, MutableSequence, Sequence
from typing import Protocol

from laneway.engines.base import Completions, InFlight
from laneway.lifecycle import Lifecycle
from laneway.limits.gate import AsyncGate, ThreadGate
from laneway.retry import (
    Interrupted,
    Outcome,
    RetryPolicy,
    aborts,
    call,
    call_async,
    failed_for_good,
    refuse_awaitable,
    retry,
    retry_async,
)
from laneway.types import Failure, Message

SyncHandler = Callable[[Message], object]
AsyncHandler = Callable[[Message], Awaitable[object]]
FailureRecord = tuple[int, str, str, int, str]
"""A failed message of a process-engine batch: ``(index in batch, error type, error text,
attempts, traceback)``."""
BatchResult = tuple[list[FailureRecord], list[float], list[tuple[int, int]]]
"""What a process worker reports for a batch: failures, handler seconds of each message
run (when timed), and ``(index, retries)`` of the messages that were retried."""

REPORT_EVERY = 0.005
"""Seconds between progress reports within one run. A run can hold hundreds of messages
of a slow lane; reporting only at its end would keep finished messages counted against
``max_buffered`` (so nothing new is fetched for the other lanes) and uncommitted for the
whole run. One clock read per message is the price (~50 ns)."""

BATCH_ID = 0
INDEX = 1
STARTED = 2
"""Slots of a process worker's shared progress array: the batch being run, the message's
index in it, and when its current attempt started (``time.monotonic_ns()``, 0 between
attempts; only written when the policy has a timeout)."""
PROGRESS_SLOTS = 3


class AttemptHook(Protocol):
    """Wraps every attempt of a handler: ``wrap`` for plain functions, ``wrap_async`` for
    ``async def`` ones. A hook used by the process engine is pickled to its workers."""

    def wrap(self, handler: SyncHandler) -> SyncHandler: ...

    def wrap_async(self, handler: AsyncHandler) -> AsyncHandler: ...


class _Report:
    """The finished and failed messages of one run, reported to ``completions`` at least
    every ``REPORT_EVERY`` seconds (:meth:`start` checks before each message, with the
    clock it reads for the worker's :class:`InFlight`) and at the end (:meth:`end`).

    When ``timed``, each finished message's time in its handler (retries included) is
    taken from that same clock, from its start to the next message's start (or the run's
    end): no extra clock read per message. ``durations[i]`` is that of ``done[i]``.
    """

    __slots__ = (
        "_completions", "_report_at", "_slot", "_timed", "done", "durations", "failed",
        "retries",
    )  # fmt: skip

    def __init__(self, completions: Completions, slot: InFlight, timed: bool) -> None:
        self._completions = completions
        self._slot = slot
        self._timed = timed
        self.done: list[Message] = []
        self.failed: list[Failure] = []
        self.durations: list[float] = []
        self.retries: dict[str, int] = {}
        self._report_at = time.monotonic() + REPORT_EVERY

    def start(self, message: Message) -> None:
        """``message`` is about to run: report what is done if it is time, and note it."""
        now = time.monotonic()
        slot = self._slot
        if self._timed:  # inlined (this runs per message): the last one's handler time
            done = self.done
            if done and done[-1] is slot.message:
                self.durations.append(now - slot.since)
        if now >= self._report_at:
            self.flush()
            self._report_at = now + REPORT_EVERY
        slot.since = now
        slot.message = message

    def flush(self) -> None:
        self._completions.report(self.done, self.failed, self.durations, self.retries)
        self.done, self.failed, self.durations, self.retries = [], [], [], {}

    def retried(self, message: Message, attempts: int) -> None:
        """``message`` took ``attempts`` attempts (counted as retries for metrics)."""
        if attempts > 1:
            self.retries[message.topic] = self.retries.get(message.topic, 0) + attempts - 1

    def settled(self) -> float:
        """The message that just ran is settled (the gate needs its time at once): its
        seconds since it started, noted as its handler time when timed and it finished;
        nothing runs until the next :meth:`start`."""
        now = time.monotonic()
        if self._timed:
            self._time(now)
        slot = self._slot
        slot.message = None
        return now - slot.since

    def end(self) -> None:
        """The run is over (or aborted): nothing is running, everything is reported."""
        if self._timed:
            self._time(time.monotonic())
        self._slot.message = None
        self.flush()

    def _time(self, now: float) -> None:
        """The message that just ran took until ``now``: note it if it finished."""
        slot, done = self._slot, self.done
        if done and done[-1] is slot.message:
            self.durations.append(now - slot.since)


class Invoker:
    """Calls ``handler`` on runs of messages with the retry ``policy``, reporting outcomes.

    ``hooks`` wrap each attempt, the first hook outermost; ``timed`` reports each
    message's handler time (see :class:`_Report`). A handler that succeeds at the
    first attempt costs one call and no retry bookkeeping: the first attempt is made
    inline and :mod:`laneway.retry` is entered only when it raised.
    """

    def __init__(
        self,
        handler: Callable[[Message], object],
        policy: RetryPolicy,
        hooks: Sequence[AttemptHook] = (),
        is_async: bool = False,
        timed: bool = False,
        gate: ThreadGate | AsyncGate | None = None,
    ) -> None:
        self.policy = policy
        self.timed = timed
        """Whether each message's handler time is measured and reported (for metrics)."""
        self.lifecycle = Lifecycle.of(handler)
        """The handler's ``open()``/``close()``: engines call them once per worker."""
        self._sync: SyncHandler = handler
        self._async: AsyncHandler = handler  # type: ignore[assignment]
        for hook in reversed(hooks):
            if is_async:
                self._async = hook.wrap_async(self._async)
            else:
                self._sync = hook.wrap(self._sync)
        self._thread_gate = gate if isinstance(gate, ThreadGate) else None
        self._async_gate = gate if isinstance(gate, AsyncGate) else None
        if gate is not None and isinstance(gate, AsyncGate) != is_async:
            raise TypeError("an async handler needs an AsyncGate, a plain one a ThreadGate")

    def run(
        self,
        run: deque[Message],
        stop: threading.Event,
        completions: Completions,
        slot: InFlight,
    ) -> None:
        """Run the handler on the messages popped from ``run`` until it is empty.

        Finished and failed messages are reported to ``completions`` every ``REPORT_EVERY``
        seconds and when the run ends (also when an abort propagates). The run is consumed
        with ``popleft`` so another thread may steal its tail (a revocation does this);
        each message is run by exactly one side. Once ``stop`` is set, the rest of the
        run, and a message whose retry backoff the stop cut short, are put back unstarted
        (and not reported). ``slot`` shows the message running, for the stall watch.
        """
        handler = self._sync
        policy = self.policy
        report = _Report(completions, slot, self.timed)
        wait = _waiter(stop)
        gate = self._thread_gate
        try:
            while run:
                if stop.is_set():
                    break
                try:
                    message = run.popleft()
                except IndexError:
                    break
                if gate is not None and not gate.enter(stop):
                    run.appendleft(message)
                    break
                report.start(message)
                failed = False
                try:
                    result = handler(message)
                    if result is not None:
                        refuse_awaitable(result)
                except BaseException as first_error:
                    if aborts(first_error):
                        raise
                    failed = True
                    try:
                        error, attempts = retry(handler, message, policy, wait, first_error)
                    except Interrupted:
                        run.appendleft(message)
                        if gate is not None:
                            gate.leave(None, True)
                        break
                    report.retried(message, attempts)
                    if error is None:
                        report.done.append(message)
                    else:
                        report.failed.append(Failure(message, *error))
                else:
                    report.done.append(message)
                if gate is not None:
                    gate.leave(report.settled(), failed)
        finally:
            report.end()

    async def run_async(
        self, run: deque[Message], completions: Completions, slot: InFlight
    ) -> None:
        """The coroutine twin of :meth:`run` (cancellation puts the message back)."""
        handler = self._async
        policy = self.policy
        report = _Report(completions, slot, self.timed)
        inline = policy.timeout is None
        gate = self._async_gate
        try:
            while run:
                message = run.popleft()
                if gate is not None:
                    try:
                        await gate.enter()
                    except BaseException:
                        run.appendleft(message)
                        raise
                report.start(message)
                try:
                    if inline:
                        try:
                            await handler(message)
                        except asyncio.CancelledError:
                            raise
                        except BaseException as first_error:
                            outcome = await retry_async(handler, message, policy, first_error)
                            error, attempts = outcome
                            report.retried(message, attempts)
                        else:
                            error, attempts = None, 1
                    else:
                        error, attempts = await call_async(handler, message, policy)
                        report.retried(message, attempts)
                except BaseException:
                    run.appendleft(message)
                    if gate is not None:
                        gate.leave(None, False)
                    raise
                if error is None:
                    report.done.append(message)
                else:
                    report.failed.append(Failure(message, *error))
                if gate is not None:
                    gate.leave(report.settled(), attempts > 1 or error is not None)
        finally:
            report.end()

    def run_rows(
        self,
        batch_id: int,
        rows: Sequence[tuple[object, ...] | None],
        progress: MutableSequence[int],
    ) -> BatchResult:
        """A process worker's batch: run every row (a message as a plain tuple; ``None``:
        given up already) in order, writing ``(batch_id, index)`` to the shared
        ``progress`` array before each; return the failures, the handler time of each
        message run when ``timed`` (else empty) and which messages were retried."""
        failures: list[FailureRecord] = []
        durations: list[float] = []
        retried: list[tuple[int, int]] = []
        timed = self.timed
        gate = self._thread_gate
        progress[INDEX] = -1
        progress[BATCH_ID] = batch_id
        for index, row in enumerate(rows):
            if row is None:
                continue
            if gate is not None:
                gate.enter(_NEVER)
            progress[INDEX] = index
            started = time.monotonic() if timed or gate else 0.0
            error, attempts = self._run_in_worker(Message(*row))  # type: ignore[arg-type]
            if gate is not None:
                gate.leave(time.monotonic() - started, attempts > 1 or error is not None)
            if timed:
                durations.append(time.monotonic() - started)
            if attempts > 1:
                retried.append((index, attempts - 1))
            if error is not None:
                failures.append((index, *error))
        progress[INDEX] = -1
        return failures, durations, retried

    def _run_in_worker(self, message: Message) -> Outcome:
        """One message with retries in a worker process, backoffs slept in place. A
        handler that raises ``KeyboardInterrupt`` (which :func:`laneway.retry.call` does
        not retry) fails that message too, so the worker survives it."""
        try:
            return call(self._sync, message, self.policy, _sleep)
        except BaseException as error:  # KeyboardInterrupt: a handler's error, not our crash
            return failed_for_good(error, 1), 1


class AttemptStamp:
    """An :class:`AttemptHook` for process workers with a handler timeout: writes when each
    attempt starts into the shared progress array, so the parent can kill a worker whose
    attempt runs too long."""

    def __init__(self, progress: MutableSequence[int]) -> None:
        self._progress = progress

    def wrap(self, handler: SyncHandler) -> SyncHandler:
        progress = self._progress

        def stamped(message: Message) -> object:
            progress[STARTED] = time.monotonic_ns()
            try:
                return handler(message)
            finally:
                progress[STARTED] = 0

        return stamped

    def wrap_async(self, handler: AsyncHandler) -> AsyncHandler:
        raise TypeError("process workers run plain functions only")


_NEVER = threading.Event()
"""A stop that never comes: process workers are stopped by their parent, not by a flag."""


def _waiter(stop: threading.Event) -> Callable[[float], bool]:
    def wait(seconds: float) -> bool:
        return not stop.wait(seconds)

    return wait


def _sleep(seconds: float) -> bool:
    time.sleep(seconds)
    return True
