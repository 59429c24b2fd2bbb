"""Running one batch's rows in a process worker, turn by turn.

The worker's runner calls :func:`run_rows` for each batch it takes from its
:class:`~laneway.engines.process.revocable.RevocableWork`. Every row (or, with
``batch_size``, every handler batch of rows) is one *turn*: the runner asks the work
whether it may begin it (not once the parent revoked what has not started), writes
``(batch id, index)`` to the shared progress array the parent watches, runs it through the
:class:`~laneway.engines.invoker.Invoker` (retries, timeouts, the key circuit, limits),
and notes what it came to.
"""

from __future__ import annotations

import threading
import time
from collections.abc import MutableSequence

from laneway.engines.attempts import BATCH_ID, INDEX
from laneway.engines.batch_runs import BatchOutcome
from laneway.engines.circuit import OPEN_ERROR
from laneway.engines.invoker import Invoker
from laneway.engines.process.revocable import RevocableWork, Rows
from laneway.types import Message

_NEVER = threading.Event()
"""A stop that never comes: process workers are stopped by their parent, not by a flag."""


def run_rows(
    invoker: Invoker,
    batch_id: int,
    rows: Rows,
    progress: MutableSequence[int],
    work: RevocableWork,
) -> None:
    """Run the rows of batch ``batch_id`` in order (``None``: given up already, or did not
    decode), noting each turn's outcome in ``work``, until they are done or revoked."""
    progress[INDEX] = -1
    progress[BATCH_ID] = batch_id
    if invoker.batch_size is None:
        _one_by_one(invoker, rows, progress, work)
    else:
        _in_batches(invoker, rows, progress, work, invoker.batch_size)
    progress[INDEX] = -1


def _one_by_one(
    invoker: Invoker, rows: Rows, progress: MutableSequence[int], work: RevocableWork
) -> None:
    timed = invoker.timed
    gate = invoker.thread_gate
    circuit = invoker.circuit
    for index, row in enumerate(rows):
        if row is None:
            continue
        message: Message = Message(*row)  # type: ignore[arg-type]
        if not work.begin(index, index):
            return
        if circuit is not None and circuit.is_open(message):
            work.ran(index, time.monotonic(), (OPEN_ERROR, 0, None))
            continue
        if gate is not None:
            gate.enter(_NEVER)
        progress[INDEX] = index
        started = time.monotonic() if timed or gate else 0.0
        outcome = invoker.call_in_worker(message)
        if circuit is not None and outcome[0] is not None:
            circuit.record_failure(message)
        if gate is not None:
            error, attempts, _ = outcome
            gate.leave(time.monotonic() - started, attempts > 1 or error is not None)
        work.ran(index, started, outcome)


def _in_batches(
    invoker: Invoker, rows: Rows, progress: MutableSequence[int], work: RevocableWork, size: int
) -> None:
    live: list[tuple[int, Message]] = [(i, Message(*r)) for i, r in enumerate(rows) if r]  # type: ignore[arg-type]
    for start in range(0, len(live), size):
        chunk = live[start : start + size]
        if not work.begin(chunk[0][0], chunk[-1][0]):
            return
        progress[INDEX] = chunk[0][0]
        began = time.monotonic()
        outcome = BatchOutcome()
        invoker.drive([message for _, message in chunk], outcome, _sleep)
        work.ran_batch(chunk, outcome, began)


def _sleep(seconds: float) -> bool:
    time.sleep(seconds)
    return True
