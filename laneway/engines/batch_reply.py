"""A process worker's reply to a batch: the records it carries and :class:`BatchReply`,
which collects them while the worker's :class:`~laneway.engines.invoker.Invoker` runs the
batch (:meth:`~laneway.engines.invoker.Invoker.run_rows`).

Messages are named by their index in the batch, so the reply stays small: a batch that ran
cleanly answers with empty lists. The parent settles the batch by it (see
:mod:`laneway.engines.process.slot`).
"""

from __future__ import annotations

import time

from laneway.engines.batch_runs import BatchOutcome
from laneway.results import Records
from laneway.retry import Outcome
from laneway.serde.codec import DESERIALIZATION
from laneway.types import Message

FailureRecord = tuple[int, str, str, int, str]
"""A failed message of a process-engine batch: ``(index in batch, error type, error text,
attempts, traceback)``."""
ResultRecord = tuple[list[int], Records]
"""Results of a process-engine batch: the indices of the messages they were returned for
(one message, or a batch handler's batch) and the records."""
BatchResult = tuple[
    list[FailureRecord], list[float], list[tuple[int, int]], list[ResultRecord], list[int]
]
"""What a process worker reports for a batch: failures, handler seconds of each message
run (when timed), ``(index, retries)`` of the messages that were retried, the results, and
the indices of messages left unstarted (none today: workers sleep their backoffs)."""


class BatchReply:
    """Collects what a process worker's run of one batch came to, by message index, into
    :attr:`result` (handler times only when ``timed``)."""

    __slots__ = ("_timed", "result")

    def __init__(self, timed: bool) -> None:
        self._timed = timed
        self.result: BatchResult = ([], [], [], [], [])
        """The reply's records, as sent to the parent."""

    def ran(self, index: int, started: float, outcome: Outcome[Records]) -> None:
        """The message at ``index``, whose handler started at ``started``
        (``time.monotonic()``), came to ``outcome``."""
        failures, durations, retried, results, _ = self.result
        error, attempts, records = outcome
        if self._timed:
            durations.append(time.monotonic() - started)
        if attempts > 1:
            retried.append((index, attempts - 1))
        if error is not None:
            failures.append((index, *error))
        elif records:
            results.append(([index], records))

    def ran_batch(
        self, chunk: list[tuple[int, Message]], outcome: BatchOutcome, began: float
    ) -> None:
        """A handler batch of ``(index, message)`` pairs, started at ``began``
        (``time.monotonic()``), came to ``outcome``; each message is given an equal share
        of the batch's time."""
        failures, durations, retried, results, _ = self.result
        if self._timed:
            durations.extend([(time.monotonic() - began) / len(chunk)] * len(chunk))
        index_of = {id(message): index for index, message in chunk}
        for failure in outcome.failed:
            index = index_of[id(failure.message)]
            failures.append(
                (index, failure.error_type, failure.error_message, failure.attempts,
                 failure.traceback)
            )  # fmt: skip
        for messages, records in outcome.results:
            results.append(([index_of[id(m)] for m in messages], records))
        for topic, count in outcome.retries.items():
            first = next(index for index, message in chunk if message.topic == topic)
            retried.append((first, count))


def with_undecodable(
    result: BatchResult,
    undecodable: list[tuple[int, str]],
    rows: list[tuple[object, ...] | None],
    timed: bool,
) -> BatchResult:
    """A batch's ``result`` with the rows that did not decode in the worker (``(index,
    error text)``) added as deserialization failures (no attempt made); with ``timed``,
    each gets a handler time of 0, so the times stay aligned with the rows sent."""
    if not undecodable:
        return result
    failures, durations, retried, results, unstarted = result
    failures = failures + [(index, DESERIALIZATION, text, 0, "") for index, text in undecodable]
    if timed:
        bad = {index for index, _ in undecodable}
        ran = iter(durations)
        durations = [0.0 if i in bad else next(ran) for i, row in enumerate(rows) if row]
    return failures, durations, retried, results, unstarted
