"""Handler results on their way to the log: written, acknowledged, then their inputs settled.

A handler that returns :class:`laneway.Produce` records hands them to the control plane
with the messages they were returned for (a *result group*, see
:data:`laneway.engines.base.ResultGroup`). A :class:`ResultWriter` writes every group and
hands its messages back as finished only once the whole group is durable:

* :class:`AcknowledgedResults` (the default, at-least-once): through the source's
  :class:`~laneway.producing.producer.Producer`, in rounds, each group settled once the
  log acknowledged every record (see
  :class:`~laneway.producing.acknowledged.AcknowledgedWrites`). A record whose write
  fails is written again after the retry backoff, ``max_retries`` times, and then its
  group's messages fail with ``ProduceError`` and take the dead-letter path (or
  ``on_failure``).
* :class:`TransactionalResults` (``exactly_once=True``): into the source's open
  transaction; the messages are settled at once, because the transaction that commits
  their offsets is the one that makes their results visible (see
  :mod:`laneway.producing.transactions`).

Order: groups are written in the order engines reported them, and a lane's messages are
reported in offset order, so results keyed like their input (same key, same partition)
are written in input order. A write that failed and is written again may land after later
results of its key (the producer keeps order among its own retries, one request in
flight per broker; laneway's retry after ``delivery.timeout.ms`` comes later).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol, cast

from laneway.engines.base import ResultGroup
from laneway.producing.acknowledged import AcknowledgedWrites
from laneway.producing.producer import Producer, TraceContext
from laneway.producing.transactions import Transaction
from laneway.results import Produce
from laneway.retry import RetryPolicy
from laneway.types import Failure, Message

PRODUCE_ERROR = "ProduceError"
"""The error type of a message whose results could not be written."""
ACKNOWLEDGEMENT_WAIT = 0.001
"""Seconds the control loop waits at most in one turn while results await acknowledgement:
a round of writes is seen to end (and the next one starts) only when the writer is
polled, once per turn, and the inputs it finishes hold buffer room and the commit point
until then."""


class ResultWriter(Protocol):
    """Writes result groups; the control thread calls :meth:`poll` every loop turn."""

    @property
    def pending(self) -> int:
        """Groups written and not settled yet."""

    def write(self, groups: list[ResultGroup]) -> None:
        """Write every record of ``groups``."""

    def poll(self) -> tuple[list[Message], list[Failure]]:
        """Messages whose results are durable, and messages whose results could not be
        written (for the dead-letter path), since the last call."""

    def close(self, timeout: float) -> None:
        """Wait up to ``timeout`` s for writes in progress; release the producer."""


def traced(produce: Produce, inputs: list[Message], tracing: TraceContext) -> Produce:
    """``produce`` with headers that carry the trace of the (first) input on."""
    headers = tracing.dead_letter_headers(inputs[0], produce.topic, produce.headers or ())
    return produce._replace(headers=headers)


class AcknowledgedResults:
    """At-least-once results: a group's messages are finished once every record of it was
    acknowledged by the log; failed writes retried ``policy.max_retries`` times with the
    retry backoff, then the group's messages fail with ``ProduceError``.

    A crash between the acknowledgement and the commit of the input's offset writes the
    results again after the restart: readers may see a result twice, never miss one.
    """

    def __init__(
        self,
        producer: Callable[[], Producer],
        policy: RetryPolicy,
        tracing: TraceContext | None = None,
    ) -> None:
        # A group of one message is written on behalf of the message itself, not of the
        # engine's one-item list: one object fewer kept alive per result until acknowledged.
        self._writes: AcknowledgedWrites[Message | list[Message]] = AcknowledgedWrites(
            producer, policy, give_up_after=policy.max_retries
        )
        self._tracing = tracing
        self._batches = False
        """Whether a group of several messages was written (then settled inputs may be
        lists); a consumer without a batch handler never pays for flattening them."""

    @property
    def pending(self) -> int:
        return self._writes.pending

    def write(self, groups: list[ResultGroup]) -> None:
        tracing = self._tracing
        if tracing is not None:
            groups = [(m, [traced(r, m, tracing) for r in records]) for m, records in groups]
        if not self._batches:
            self._batches = any(len(messages) > 1 for messages, _ in groups)
        self._writes.write_all(
            (messages[0] if len(messages) == 1 else messages, records)
            for messages, records in groups
        )

    def poll(self) -> tuple[list[Message], list[Failure]]:
        done = self._writes.poll()
        if self._batches:  # some inputs are lists of messages (a batch handler's groups)
            settled = [m for d in done for m in (d if isinstance(d, list) else (d,))]
        else:  # every input is a message
            settled = cast(list[Message], done)
        failed = [
            Failure(message, PRODUCE_ERROR, f"writing its results failed: {error}", tries)
            for given_up, error, tries in self._writes.abandoned()
            for message in (given_up if isinstance(given_up, list) else [given_up])
        ]
        return settled, failed

    def close(self, timeout: float) -> None:
        self._writes.close(timeout)


class TransactionalResults:
    """Exactly-once results: records go into the source's open ``transaction`` and their
    messages are settled at once; the transaction commits them together with the
    offsets (see :class:`~laneway.offsets.transactional.TransactionalProgress`).
    A write the transaction refuses aborts it, which ends the consumer's run (it restarts
    from the last commit)."""

    def __init__(self, transaction: Transaction, tracing: TraceContext | None = None) -> None:
        self._transaction = transaction
        self._tracing = tracing
        self._settled: list[Message] = []

    @property
    def pending(self) -> int:
        return 0

    def write(self, groups: list[ResultGroup]) -> None:
        tracing, produce = self._tracing, self._transaction.produce
        for messages, records in groups:
            for record in records:
                produce(record if tracing is None else traced(record, messages, tracing))
            self._settled.extend(messages)

    def poll(self) -> tuple[list[Message], list[Failure]]:
        self._transaction.poll()
        settled, self._settled = self._settled, []
        return settled, []

    def close(self, timeout: float) -> None:
        """Release the transaction (after the last commit; anything still open aborts)."""
        self._transaction.close()
