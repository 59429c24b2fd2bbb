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
  retries, results, unstarted), seconds)``, where each failure is ``(index, error type,
  error text, attempts, traceback)``, ``durations`` the handler seconds of each message
  run (only when metrics are on, else empty), ``results`` the records handlers returned
  with the indices of the messages they belong to (results ride back with the batch's
  reply: no message per result) and ``seconds`` how long the batch took; an empty payload
  means "exit". With a batch handler the worker calls it on runs of ``batch_size`` rows.

A receiver thread reads batches off the pipe as soon as they arrive, so the parent's
send never waits for the handler to finish the previous batch. Before each message the
worker writes ``(batch_id, index)`` to a small shared array (and, with a timeout, when
each attempt starts); if the process dies or hangs, the parent reads it to learn which
message was running.

Workers ignore SIGINT: Ctrl-C goes to the whole process group, and the parent decides
how to drain. A handler that raises ``SystemExit`` fails that attempt like any error;
``KeyboardInterrupt`` fails the message at once; either way the worker keeps running.
"""

from __future__ import annotations

import os
import pickle
import signal
import threading
import time
from collections.abc import MutableSequence
from multiprocessing.connection import Connection
from queue import SimpleQueue

from laneway.engines.admission.gate import gate_for
from laneway.engines.attempts import AttemptStamp
from laneway.engines.invoker import Invoker
from laneway.retry import RetryPolicy, describe


def worker_main(
    conn: Connection, handler_blob: bytes, policy: RetryPolicy, progress: MutableSequence[int]
) -> None:
    """Entry point of a worker process (the ``target`` of its ``Process``)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        handler, hooks, timed, batch_size, limits = pickle.loads(handler_blob)
    except BaseException as error:  # reported to the parent, which raises
        name, text = describe(error)
        conn.send_bytes(pickle.dumps(("error", f"{name}: {text}")))
        return
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
        _serve(conn, invoker, progress)
    finally:
        invoker.lifecycle.close_now()


def _serve(conn: Connection, invoker: Invoker, progress: MutableSequence[int]) -> None:
    """Answer batches until the parent says "exit" or goes away."""
    conn.send_bytes(pickle.dumps(("ready", os.getpid())))
    inbox: SimpleQueue[bytes | None] = SimpleQueue()
    threading.Thread(
        target=_receive, args=(conn, inbox), name="laneway-worker-receiver", daemon=True
    ).start()
    while True:
        data = inbox.get()
        if data is None:
            return
        batch_id, rows = pickle.loads(data)
        started = time.perf_counter()
        result = invoker.run_rows(batch_id, rows, progress)
        reply = (batch_id, result, time.perf_counter() - started)
        try:
            conn.send_bytes(pickle.dumps(reply, protocol=5))
        except OSError:
            return


def _receive(conn: Connection, inbox: SimpleQueue[bytes | None]) -> None:
    """Move batches from the pipe to ``inbox``; ``None`` on "exit" or when the parent is gone."""
    while True:
        try:
            data = conn.recv_bytes()
        except (EOFError, OSError):
            data = b""
        if not data:
            inbox.put(None)
            return
        inbox.put(data)
