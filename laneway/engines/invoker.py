"""The Invoker: the one place laneway calls a user's handler.

Every engine runs handlers through an :class:`Invoker`: the sync and thread engines with
:meth:`Invoker.run`, the async engine with :meth:`Invoker.run_async`, and each process
engine worker with :meth:`Invoker.call_in_worker` and :meth:`Invoker.drive` (see
:mod:`laneway.engines.process.rows`); batch handlers with :meth:`Invoker.run_batch` and
:meth:`Invoker.run_batch_async`. What counts as a failure and how it is retried is
decided in :mod:`laneway.retry` (and for batches :mod:`laneway.engines.batch_runs`); what
a handler may return in :mod:`laneway.results`; what is reported when, here.

*Attempt hooks* (:class:`~laneway.engines.attempts.AttemptHook`) wrap every attempt of the
handler, retries included: timing, tracing, or the process worker's timeout stamp. They are
applied once, when the invoker is built, so a consumer without hooks calls the user's
function directly.

*Limits* (``max_rate``, ``concurrency_limit="adaptive"``) are a gate each message passes
before its handler runs (:mod:`laneway.engines.admission.gate`), outside the attempt:
waiting there counts neither as handler time nor against ``handler_timeout``. A message is
taken from its run before the wait, so idle workers taking over a busy run's tail (in
unordered mode) cannot keep robbing the worker at the head of the gate's queue. Batch
handlers take no gate (the config refuses limits with ``batch_size``).

*The key circuit* (``poison_threshold``, :class:`~laneway.engines.circuit.KeyCircuitBreaker`)
is checked right before a message runs (a batch: before each call) and told each final
failure right after it, in the same worker: a message of a key whose circuit is open fails
as ``CircuitOpen`` without running, so a key's lane stops at the threshold."""

from __future__ import annotations

import asyncio
import threading
import time
from collections import deque
from collections.abc import Awaitable, Callable, Sequence

from laneway.engines.admission.gate import AsyncGate, ThreadGate
from laneway.engines.attempts import AsyncHandler, AttemptHook, SyncHandler
from laneway.engines.base import Completions, InFlight
from laneway.engines.batch_runs import BatchOutcome, Call, check_batch, steps
from laneway.engines.circuit import KeyCircuitBreaker, open_failure
from laneway.engines.lifecycle import Lifecycle
from laneway.engines.run_report import RunReport
from laneway.results import Records, records_of
from laneway.retry import (
    Interrupted,
    Outcome,
    RetryPolicy,
    aborts,
    call,
    call_async,
    failed_for_good,
    retry,
    retry_async,
    sleep_at_least,
    timed_out,
)
from laneway.types import Failure, Message


class Invoker:
    """Calls ``handler`` on runs of messages with the retry ``policy``, reporting outcomes.

    ``hooks`` wrap each attempt, the first hook outermost; ``timed`` reports each
    message's handler time (see :class:`~laneway.engines.run_report.RunReport`). A
    handler that succeeds at the first attempt costs one call and no retry bookkeeping:
    the first attempt is made inline and :mod:`laneway.retry` is entered only when it
    raised. With ``batch_size`` the handler is a batch handler: it is called with lists of
    messages (see :mod:`laneway.engines.batch_runs` for how a failing batch is retried and
    split).
    """

    def __init__(
        self,
        handler: Callable[[Message], object],
        policy: RetryPolicy,
        hooks: Sequence[AttemptHook] = (),
        is_async: bool = False,
        timed: bool = False,
        batch_size: int | None = None,
        gate: ThreadGate | AsyncGate | None = None,
    ) -> None:
        self.policy = policy
        self.timed = timed
        """Whether each message's handler time is measured and reported (for metrics)."""
        self.batch_size = batch_size
        """Most messages per handler call (``None``: one message, not a list)."""
        self.lifecycle = Lifecycle.of(handler)
        """The handler's ``open()``/``close()``: engines call them once per worker."""
        limit, cooldown = policy.poison_threshold, policy.poison_cooldown
        self.circuit = None if limit is None else KeyCircuitBreaker(limit, cooldown)
        """The key circuit of ``poison_threshold``, checked before each message runs."""
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
        report = RunReport(completions, slot, self.timed)
        wait = _waiter(stop)
        gate = self._thread_gate
        circuit = self.circuit
        try:
            while run:
                if stop.is_set():
                    break
                try:
                    message = run.popleft()
                except IndexError:
                    break
                if circuit is not None and circuit.is_open(message):
                    report.failed.append(open_failure(message))
                    continue
                if gate is not None and not gate.enter(stop):
                    run.appendleft(message)
                    break
                report.start(message)
                failed = False
                try:
                    result = handler(message)
                    records: Records | None = [] if result is None else records_of(result)
                except BaseException as first_error:
                    if aborts(first_error):
                        raise
                    failed = True
                    try:
                        error, attempts, records = retry(
                            handler, message, policy, wait, records_of, first_error
                        )
                    except Interrupted:
                        run.appendleft(message)
                        if gate is not None:
                            gate.leave(None, True)
                        break
                    report.retried(message, attempts)
                    if error is None:
                        report.finished(message, records or [])
                    else:
                        if circuit is not None:
                            circuit.record_failure(message)
                        report.failed_for_good(Failure(message, *error))
                else:
                    if records:
                        report.results.append(([message], records))
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
        report = RunReport(completions, slot, self.timed)
        inline = policy.timeout is None
        gate = self._async_gate
        circuit = self.circuit
        try:
            while run:
                message = run.popleft()
                if circuit is not None and circuit.is_open(message):
                    report.failed.append(open_failure(message))
                    continue
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
                            result = await handler(message)
                            records: Records | None = [] if result is None else records_of(result)
                        except asyncio.CancelledError:
                            raise
                        except BaseException as first_error:
                            error, attempts, records = await retry_async(
                                handler, message, policy, records_of, first_error
                            )
                            report.retried(message, attempts)
                        else:
                            error, attempts = None, 1
                    else:
                        error, attempts, records = await call_async(
                            handler, message, policy, records_of
                        )
                        report.retried(message, attempts)
                except BaseException:
                    run.appendleft(message)
                    if gate is not None:
                        gate.leave(None, False)
                    raise
                if error is None:
                    report.finished(message, records or [])
                else:
                    if circuit is not None:
                        circuit.record_failure(message)
                    report.failed_for_good(Failure(message, *error))
                if gate is not None:
                    gate.leave(report.settled(), attempts > 1 or error is not None)
                if error is not None:
                    await asyncio.sleep(0)  # let a cancel the failure causes reach the loop
        finally:
            report.end()

    def run_batch(
        self, batch: list[Message], stop: threading.Event, completions: Completions, slot: InFlight
    ) -> list[Message]:
        """Run the batch handler on ``batch`` (retries and bisection included) and report
        what it came to; return the messages a ``stop`` during a backoff left unstarted."""
        report = RunReport(completions, slot, self.timed)
        slot.message, slot.since = batch[0], time.monotonic()
        outcome = BatchOutcome()
        try:
            self.drive(batch, outcome, _waiter(stop))
            report.batch(outcome, time.monotonic() - slot.since)
        finally:
            report.end()
        return outcome.unstarted

    async def run_batch_async(
        self, batch: list[Message], completions: Completions, slot: InFlight
    ) -> None:
        """The coroutine twin of :meth:`run_batch` (a backoff is never cut short: a stop
        cancels the coroutine, and what it has not reported stays unfinished)."""
        report = RunReport(completions, slot, self.timed)
        slot.message, slot.since = batch[0], time.monotonic()
        outcome = BatchOutcome()
        handler, timeout = self._async, self.policy.timeout
        plan = steps(batch, self.policy, outcome, self.circuit)
        reply: object = None
        try:
            while True:
                try:
                    step = plan.send(reply)
                except StopIteration:
                    break
                if isinstance(step, Call):
                    try:
                        returned = await _bounded(handler(step.items), timeout)
                        reply = check_batch(returned, len(step.items))
                    except asyncio.CancelledError:
                        raise
                    except BaseException as error:
                        reply = error
                else:
                    await sleep_at_least(step.seconds)
                    reply = True
            report.batch(outcome, time.monotonic() - slot.since)
        finally:
            report.end()

    @property
    def thread_gate(self) -> ThreadGate | None:
        """The gate plain handlers pass before each message (``None``: no limits)."""
        return self._thread_gate

    def drive(
        self, batch: list[Message], outcome: BatchOutcome, wait: Callable[[float], bool]
    ) -> None:
        """Run a batch handler on ``batch`` through the steps of
        :func:`~laneway.engines.batch_runs.steps` (retries, splits) with plain calls,
        backoffs waited by ``wait`` (``False``: stop waiting), into ``outcome``."""
        handler = self._sync
        plan = steps(batch, self.policy, outcome, self.circuit)
        reply: object = None
        while True:
            try:
                step = plan.send(reply)
            except StopIteration:
                return
            if isinstance(step, Call):
                try:
                    reply = check_batch(handler(step.items), len(step.items))
                except BaseException as error:
                    if aborts(error):
                        plan.close()
                        raise
                    reply = error
            else:
                reply = wait(step.seconds)

    def call_in_worker(self, message: Message) -> Outcome[Records]:
        """One message with retries in a worker process, backoffs slept in place; a
        ``KeyboardInterrupt`` (not retried) fails that message too: the worker survives."""
        try:
            return call(self._sync, message, self.policy, _sleep, records_of)
        except BaseException as error:  # KeyboardInterrupt: a handler's error, not our crash
            return failed_for_good(error, 1), 1, None


def _waiter(stop: threading.Event) -> Callable[[float], bool]:
    return lambda seconds: not stop.wait(seconds)


def _sleep(seconds: float) -> bool:
    time.sleep(seconds)
    return True


async def _bounded(attempt: Awaitable[object], timeout: float | None) -> object:
    """Await one attempt, cancelled past ``timeout`` with a TimeoutError saying so."""
    if timeout is None:
        return await attempt
    try:
        return await asyncio.wait_for(attempt, timeout)
    except asyncio.TimeoutError:
        raise TimeoutError(timed_out(timeout)) from None
