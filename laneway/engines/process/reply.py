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
    list[FailureRecord], list[tuple[int, float]], list[tuple[int, int]], list[ResultRecord]
]
"""What a process worker reports for (a part of) a batch: failures, ``(index, handler
seconds)`` of each message run (when timed), ``(index, retries)`` of the messages that were
retried, and the results."""


class BatchReply:
    """Collects what a process worker's run of one batch came to, by message index, into
    :attr:`result` (handler times only when ``timed``)."""

    __slots__ = ("_timed", "result")

    def __init__(self, timed: bool) -> None:
        self._timed = timed
        self.result: BatchResult = ([], [], [], [])
        """The reply's records, as sent to the parent."""

    def ran(self, index: int, started: float, outcome: Outcome[Records]) -> None:
        """The message at ``index``, whose handler started at ``started``
        (``time.monotonic()``), came to ``outcome``."""
        failures, durations, retried, results = self.result
        error, attempts, records = outcome
        if self._timed:
            durations.append((index, time.monotonic() - started))
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
        failures, durations, retried, results = self.result
        if self._timed:
            share = (time.monotonic() - began) / len(chunk)
            durations.extend([(index, share) for index, _ in chunk])
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

    def undecodable(self, rows: list[tuple[int, str]]) -> None:
        """Rows that did not decode in the worker, ``(index, error text)``: deserialization
        failures, with no attempt made (a handler time of 0 when timed)."""
        failures, durations, _, _ = self.result
        failures.extend((index, DESERIALIZATION, text, 0, "") for index, text in rows)
        if self._timed:
            durations.extend((index, 0.0) for index, _ in rows)
