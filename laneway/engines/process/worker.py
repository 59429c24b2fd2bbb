"""The code that runs inside a process engine worker.

A worker is started (by :class:`laneway.engines.process.slot.WorkerProcess`, for
:class:`laneway.engines.process.engine.ProcessEngine`) with the ``spawn`` start method and talks
to the parent over one duplex pipe:

* at start-up it unpickles the handler (importing it by name), calls its ``open()`` if it
  has one (see :mod:`laneway.engines.lifecycle`) and sends one handshake, ``("ready", pid)``,
  ``("error", text)`` (unpickling failed) or ``("open-failed", text)``; its ``close()``
  runs when the worker exits;
* then the parent sends batches, ``pickle.dumps((batch_id, [message tuple | None, ...]))``
  (``None`` marks a message the parent already gave up on, see the engine's docs), and
  the worker answers each with one small reply, ``(batch_id, (failures, durations,
  retries, results), seconds)``, where each failure is ``(index, error type, error text,
  attempts, traceback)``, ``durations`` the ``(index, handler seconds)`` of each message
  run (only when metrics are on, else empty), ``results`` the records handlers returned
  with the indices of the messages they belong to (results ride back with the batch's
  reply: no message per result) and ``seconds`` how long the batch took; an empty payload
  means "exit". With a batch handler the worker calls it on runs of ``batch_size`` rows;
* the parent may send ``("revoke", batch_id, index)`` when that row has been running too
  long (see :mod:`laneway.engines.process.detaching`): the receiver thread answers at
  once with ``("revoked", batch_id, first, last, before, never)`` (see
  :class:`~laneway.engines.process.revocable.RevocableWork`), or ``("moved-on",)`` when the
  runner is no longer in that row. After a revocation the batch's answer covers the
  running turn only, and the worker exits once it is sent.

With a ``value_deserializer`` or ``key_deserializer`` the handler arrives as a
:class:`~laneway.serde.typed_handlers.DecodingHandler`: the worker decodes each batch's rows
before it runs them (the parent ships bytes and decodes nothing), and a row that does not
decode is not run but reported as a failure of error type ``deserialization`` with no
attempt, which the parent dead-letters without a retry.

A receiver thread reads batches off the pipe as soon as they arrive, so the parent's
send never waits for the handler to finish the previous batch, and answers revocations
while the runner sits in a call. Both threads send under one lock. Before each message the
worker writes ``(batch_id, index)`` to a small shared array (and, with a timeout, when
each attempt starts); if the process dies or hangs, the parent reads it to learn which
message was running.

Workers leave SIGINT and SIGTERM to the parent: Ctrl-C, ``kill -TERM -PGID``, ``timeout``,
systemd's default ``KillMode=control-group`` and a Kubernetes pod stop through a shell
signal the whole process group (or cgroup), workers included, and the parent decides how
to drain: it stops sending work, waits for the batches out, then tells each worker to
exit, and the handler's ``close()`` runs once in each. A worker therefore catches both
signals with a handler that does nothing (not ``SIG_IGN``, which processes a handler
starts would inherit), from before the handler is unpickled; the parent blocks them while
it starts a worker (see :class:`~laneway.engines.process.slot.WorkerProcess`), so a signal
that arrives while the worker's interpreter starts waits for that handler too. The parent
ends a worker that does not stop in time with SIGKILL. A handler that raises
``SystemExit`` fails that attempt like any error; ``KeyboardInterrupt`` fails the message
at once; either way the worker keeps running.
"""

from __future__ import annotations

import os
import pickle
import signal
import threading
import time
from collections.abc import MutableSequence
from multiprocessing.connection import Connection
from types import FrameType

from laneway.engines.admission.gate import gate_for
from laneway.engines.attempts import AttemptStamp
from laneway.engines.invoker import Invoker
from laneway.engines.process.revocable import RevocableWork, Rows
from laneway.engines.process.rows import run_rows
from laneway.retry import RetryPolicy, describe
from laneway.serde.decoding import Decoding
from laneway.serde.typed_handlers import DecodingHandler, WorkerViews


def worker_main(
    conn: Connection, handler_blob: bytes, policy: RetryPolicy, progress: MutableSequence[int]
) -> None:
    """Entry point of a worker process (the ``target`` of its ``Process``)."""
    leave_signals_to_the_parent()
    try:
        handler, hooks, timed, batch_size, limits = pickle.loads(handler_blob)
    except BaseException as error:  # reported to the parent, which raises
        name, text = describe(error)
        conn.send_bytes(pickle.dumps(("error", f"{name}: {text}")))
        return
    decoding: Decoding | None = None
    views = WorkerViews()
    if isinstance(handler, DecodingHandler):  # typed messages: decoded here, not in the parent
        handler, decoding, views = handler.in_worker(batch_size is not None)
    if policy.timeout is not None:
        hooks = (*hooks, AttemptStamp(progress))
    gate = None if limits is None else gate_for(limits, is_async=False)
    invoker = Invoker(handler, policy, hooks, timed=timed, batch_size=batch_size, gate=gate)
    try:
        invoker.lifecycle.open_now()
    except BaseException as error:
        name, text = describe(error)
        conn.send_bytes(
            pickle.dumps(("open-failed", f"the handler's open() raised {name}: {text}"))
        )
        return
    try:
        _serve(conn, invoker, progress, decoding, views)
    finally:
        invoker.lifecycle.close_now()


REVOKE = "revoke"
"""The parent's request for what a worker has not started (see the module docs)."""
REVOKED = "revoked"
MOVED_ON = "moved-on"
"""The receiver's two answers to it."""

PARENTS_SIGNALS = frozenset({signal.SIGINT, signal.SIGTERM})
"""Signals a worker leaves to its parent (see the module docs)."""


def leave_signals_to_the_parent() -> None:
    """Catch :data:`PARENTS_SIGNALS` with a handler that does nothing, then unblock them
    (the parent starts workers with them blocked): a signal that arrived meanwhile is
    handled, by doing nothing, now. Processes the handler starts get the default action
    back (exec resets caught signals, unlike ignored ones)."""
    for signum in PARENTS_SIGNALS:
        signal.signal(signum, _leave_to_the_parent)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, PARENTS_SIGNALS)


def _leave_to_the_parent(signum: int, frame: FrameType | None) -> None:
    """The parent got the same signal (it went to the process group) and drains."""


def _serve(
    conn: Connection,
    invoker: Invoker,
    progress: MutableSequence[int],
    decoding: Decoding | None,
    views: WorkerViews,
) -> None:
    """Answer batches until the parent says "exit", goes away or revokes the rest; with
    ``decoding``, each batch's rows are decoded first (see :func:`_run_decoded`)."""
    conn.send_bytes(pickle.dumps(("ready", os.getpid())))
    work = RevocableWork(invoker.timed)
    sending = threading.Lock()
    threading.Thread(
        target=_receive,
        args=(conn, work, sending),
        name="laneway-worker-receiver",
        daemon=True,
    ).start()
    while True:
        taken = work.next_batch()
        if taken is None:
            return
        batch_id, rows = taken
        started = time.perf_counter()
        if decoding is None:
            run_rows(invoker, batch_id, rows, progress, work)
        else:
            _run_decoded(invoker, decoding, views, batch_id, rows, progress, work)
        reply = (batch_id, work.answer(), time.perf_counter() - started)
        try:
            with sending:
                conn.send_bytes(pickle.dumps(reply, protocol=5))
        except OSError:
            return


def _run_decoded(
    invoker: Invoker,
    decoding: Decoding,
    views: WorkerViews,
    batch_id: int,
    rows: Rows,
    progress: MutableSequence[int],
    work: RevocableWork,
) -> None:
    """Decode the batch's rows, note those that did not decode as deserialization failures
    (not retried, the handler not called), and run the others with their views at hand."""
    kept, views.by_position, undecodable = decoding.rows(rows)
    if undecodable:
        work.undecodable(undecodable)
    try:
        run_rows(invoker, batch_id, kept, progress, work)
    finally:
        views.by_position = {}


def _receive(conn: Connection, work: RevocableWork, sending: threading.Lock) -> None:
    """Move batches from the pipe to ``work`` and answer revocations; close ``work`` on
    "exit" or when the parent is gone."""
    while True:
        try:
            data = conn.recv_bytes()
        except (EOFError, OSError):
            data = b""
        if not data:
            work.close()
            return
        message = pickle.loads(data)
        if message[0] != REVOKE:
            work.put(*message)
            continue
        _, batch_id, index = message
        revoked = work.revoke(batch_id, index)
        answer = (MOVED_ON,) if revoked is None else (REVOKED, *revoked)
        try:
            with sending:
                conn.send_bytes(pickle.dumps(answer, protocol=5))
        except OSError:
            work.close()
            return
