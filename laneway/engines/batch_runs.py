"""Running a batch handler on one batch: retry it, then bisect it down to the bad messages.

The algorithm is written once, as a generator (:func:`steps`) that yields what to do next
— call the handler on some messages (:class:`Call`), or wait out a backoff
(:class:`Wait`) — and is sent back what came of it. The invoker drives it with plain calls
and sleeps (sync, thread and process engines) or with awaits (async engine), so both kinds
of handler fail, retry and split the same way.

What happens to a batch (``policy``: the consumer's retry options):

1. The handler is called with the whole batch. If it returns, every message is done (with
   the results it returned, which belong to the batch as a whole), unless it returned
   :class:`~laneway.results.Outcomes`: then the messages it reported failed are *pending*.
2. While messages are pending and retries are left, the pending messages are called again
   as a batch after the backoff (``max_retries``, ``retry_backoff``).
3. Retries used up: messages the handler itself reported failed go to dead letters, each
   with its own error. If the last call raised instead, the pending batch is *bisected*:
   each half is tried once, in order, a failing half is split again, and a single message
   that still fails goes to dead letters alone. One bad message among ``n`` costs about
   ``2 log2(n)`` extra calls, and every healthy message is done.

Calls within a batch keep the batch's order (first half before the second), so a lane's
messages, which a batch holds in offset order, still run in offset order. A retried or
bisected message may run more than once (at-least-once, as for single messages).
"""

from __future__ import annotations

from collections.abc import Generator
from dataclasses import dataclass, field

from laneway.engines.circuit import KeyCircuitBreaker
from laneway.results import ALLOWED, Outcomes, Records, records_of
from laneway.retry import RetryPolicy, failed_for_good, log_retry
from laneway.types import Failure, Message


@dataclass(slots=True)
class Call:
    """Call the handler with ``items``; send back its checked return value or the exception."""

    items: list[Message]


@dataclass(slots=True)
class Wait:
    """Wait ``seconds`` (a retry backoff); send back False when a stop cut the wait short."""

    seconds: float


Step = Call | Wait


class PerMessage(list["Records | BaseException"]):
    """Checked :class:`~laneway.results.Outcomes`: per message, its results or its error."""


Checked = Records | PerMessage
"""A batch handler's return value, checked: results for the whole batch, or per message."""


@dataclass(slots=True)
class BatchOutcome:
    """What running one batch came to: messages ``done`` without results, result groups
    (messages and the records written for them), ``failed`` messages for dead letters,
    retries made per topic, and messages left ``unstarted`` by a stop during a backoff."""

    done: list[Message] = field(default_factory=list)
    results: list[tuple[list[Message], Records]] = field(default_factory=list)
    failed: list[Failure] = field(default_factory=list)
    retries: dict[str, int] = field(default_factory=dict)
    unstarted: list[Message] = field(default_factory=list)


BATCH_ALLOWED = f"{ALLOWED}, or laneway.Outcomes"
"""What a batch handler may return, as error messages say it."""


def check_batch(returned: object, size: int) -> Checked:
    """A batch handler's return value for a batch of ``size``; ``TypeError`` if not allowed
    (see :mod:`laneway.results`). An outcome in :class:`Outcomes` that is not allowed
    fails its own message with that ``TypeError``."""
    if not isinstance(returned, Outcomes):
        return records_of(returned, BATCH_ALLOWED)
    outcomes = returned.outcomes
    if len(outcomes) != size:
        raise TypeError(
            f"the handler returned Outcomes for {len(outcomes)} messages, but its batch held "
            f"{size}: give one outcome per message, in the batch's order"
        )
    return PerMessage(_checked_outcome(i, o) for i, o in enumerate(outcomes))


def _checked_outcome(index: int, outcome: object) -> Records | BaseException:
    if isinstance(outcome, BaseException):
        return outcome
    try:
        return records_of(outcome, f"an exception, {ALLOWED} for each message")
    except TypeError as error:
        return TypeError(f"Outcomes[{index}]: {error}")


def steps(
    batch: list[Message],
    policy: RetryPolicy,
    out: BatchOutcome,
    circuit: KeyCircuitBreaker | None = None,
) -> Generator[Step, object, None]:
    """The algorithm of the module docs, filling ``out`` as it goes. With a ``circuit``,
    messages of keys whose circuit is open fail as ``CircuitOpen`` without a call, and the
    batch's final failures are counted in it when it is done."""
    if circuit is None:
        yield from _steps(batch, policy, out)
        return
    runnable = circuit.admit(batch, out.failed)
    if runnable:
        yield from _steps(runnable, policy, out)
    circuit.record(out.failed)


def _steps(
    batch: list[Message], policy: RetryPolicy, out: BatchOutcome
) -> Generator[Step, object, None]:
    pending = batch
    attempts = 0
    while True:
        attempts += 1
        reply = yield Call(pending)
        if isinstance(reply, BaseException):
            error: BaseException = reply
            identified: list[tuple[Message, BaseException]] = []
        else:
            identified = _accept(pending, reply, out)  # type: ignore[arg-type]
            if not identified:
                return
            pending = [message for message, _ in identified]
            error = identified[0][1]
        if attempts > policy.max_retries or isinstance(error, KeyboardInterrupt):
            break
        delay = policy.delay(attempts)
        log_retry(pending, attempts, error, delay)
        if not (yield Wait(delay)):
            out.unstarted.extend(pending)
            return
        for message in pending:
            out.retries[message.topic] = out.retries.get(message.topic, 0) + 1
    if identified:
        for message, failure in identified:
            out.failed.append(Failure(message, *failed_for_good(failure, attempts)))
        return
    yield from _bisect(pending, error, attempts, out)


def _bisect(
    batch: list[Message], error: BaseException, attempts: int, out: BatchOutcome
) -> Generator[Step, object, None]:
    if len(batch) == 1:
        out.failed.append(Failure(batch[0], *failed_for_good(error, attempts)))
        return
    middle = len(batch) // 2
    for half in (batch[:middle], batch[middle:]):
        reply = yield Call(half)
        if isinstance(reply, BaseException):
            yield from _bisect(half, reply, attempts + 1, out)
            continue
        for message, failure in _accept(half, reply, out):  # type: ignore[arg-type]
            out.failed.append(Failure(message, *failed_for_good(failure, attempts + 1)))


def _accept(
    batch: list[Message], value: Checked, out: BatchOutcome
) -> list[tuple[Message, BaseException]]:
    """Record a returned call; return the messages the handler reported failed."""
    if not isinstance(value, PerMessage):
        if value:
            out.results.append((batch, value))
        else:
            out.done.extend(batch)
        return []
    failed: list[tuple[Message, BaseException]] = []
    for message, outcome in zip(batch, value, strict=True):
        if isinstance(outcome, BaseException):
            failed.append((message, outcome))
        elif outcome:
            out.results.append(([message], outcome))
        else:
            out.done.append(message)
    return failed
