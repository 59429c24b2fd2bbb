"""The work a process worker holds, and how its parent takes back what has not started.

A worker's receiver thread puts the batches it reads off the pipe here; its runner (the
main thread) takes them one at a time and runs their rows turn by turn (a turn: one row,
or one handler batch of ``batch_size`` rows), noting what each came to in the batch's
:class:`~laneway.engines.process.reply.BatchReply`.

When a call has been running too long (see :mod:`laneway.engines.process.detaching`), the
parent asks for everything the worker has not started back: the receiver calls
:meth:`RevocableWork.revoke` with the turn the parent saw running. Under one lock with the
runner's :meth:`~RevocableWork.begin` and :meth:`~RevocableWork.ran`, it takes what the
batch's finished turns came to (the parent settles it at once: a call that never returns
no longer keeps its batch's finished messages uncommitted), every row after the running
turn and every batch not started. The runner finishes the running turn, answers for it
alone, and stops. So each row is either run here or handed back, never both, and the
parent learns which from the answer.
"""

from __future__ import annotations

import threading
from collections import deque

from laneway.engines.batch_runs import BatchOutcome
from laneway.engines.process.reply import BatchReply, BatchResult
from laneway.results import Records
from laneway.retry import Outcome
from laneway.types import Message

Rows = list[tuple[object, ...] | None]
"""A batch as shipped: a message as a plain tuple, ``None`` for one already given up on."""

Revoked = tuple[int, int, int, BatchResult, list[int]]
"""What a revocation took: ``(batch id, first index, last index of the running turn, what
the turns before it came to, the ids of the batches never started)``."""


class RevocableWork:
    """A process worker's batches: those received and not started, and the one running.

    Shared by the receiver thread (:meth:`put`, :meth:`close`, :meth:`revoke`) and the
    runner (:meth:`next_batch`, :meth:`begin`, :meth:`ran`, :meth:`ran_batch`,
    :meth:`answer`). The lock is taken twice per turn by the runner, uncontended but for
    a revocation. Tuning: none.
    """

    def __init__(self, timed: bool) -> None:
        self._timed = timed
        self._lock = threading.Condition()
        self._pending: deque[tuple[int, Rows]] = deque()
        self._closed = False
        self._revoked = False
        self._batch = -1
        self._turn: tuple[int, int] | None = None
        self._reply = BatchReply(timed)

    def put(self, batch_id: int, rows: Rows) -> None:
        """A batch came in (receiver)."""
        with self._lock:
            self._pending.append((batch_id, rows))
            self._lock.notify()

    def close(self) -> None:
        """The parent said "exit" or went away (receiver): the runner stops after the
        batch it runs."""
        with self._lock:
            self._closed = True
            self._lock.notify()

    def next_batch(self) -> tuple[int, Rows] | None:
        """The next batch to run (runner), waiting for one; ``None`` once closed or
        revoked."""
        with self._lock:
            while not self._pending and not self._closed and not self._revoked:
                self._lock.wait()
            if self._revoked or not self._pending:
                return None
            self._batch, rows = self._pending.popleft()
            self._reply = BatchReply(self._timed)
            return self._batch, rows

    def begin(self, first: int, last: int) -> bool:
        """Whether the runner may start the turn of rows ``first``..``last``: not once
        the work was revoked."""
        with self._lock:
            if self._revoked:
                return False
            self._turn = (first, last)
            return True

    def ran(self, index: int, started: float, outcome: Outcome[Records]) -> None:
        """The row at ``index`` came to ``outcome`` (see :meth:`BatchReply.ran`)."""
        with self._lock:
            self._reply.ran(index, started, outcome)
            self._turn = None

    def ran_batch(
        self, chunk: list[tuple[int, Message]], outcome: BatchOutcome, began: float
    ) -> None:
        """A handler batch came to ``outcome`` (see :meth:`BatchReply.ran_batch`)."""
        with self._lock:
            self._reply.ran_batch(chunk, outcome, began)
            self._turn = None

    def undecodable(self, rows: list[tuple[int, str]]) -> None:
        """Rows of the current batch that did not decode (settled before any turn)."""
        with self._lock:
            self._reply.undecodable(rows)

    def answer(self) -> BatchResult:
        """What the current batch came to since the last revocation took its part."""
        with self._lock:
            return self._reply.result

    def revoke(self, batch_id: int, index: int) -> Revoked | None:
        """Take back what has not started (receiver), if the runner is still in the turn
        holding row ``index`` of batch ``batch_id``; ``None`` if it is not (it moved on:
        not stuck after all) and nothing was taken."""
        with self._lock:
            turn = self._turn
            if self._batch != batch_id or turn is None or not turn[0] <= index <= turn[1]:
                return None
            self._revoked = True
            before = self._reply.result
            self._reply = BatchReply(self._timed)
            never = [pending_id for pending_id, _ in self._pending]
            self._pending.clear()
            self._lock.notify()
            return batch_id, turn[0], turn[1], before, never
