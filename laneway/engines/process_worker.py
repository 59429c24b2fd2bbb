"""The code that runs inside a process engine worker.

A worker is started (by :class:`laneway.engines.process_slot.WorkerProcess`, for
:class:`laneway.engines.process.ProcessEngine`) with the ``spawn`` start method and talks
to the parent over one duplex pipe:

* at start-up it unpickles the handler (importing it by name) and sends one handshake,
  ``("ready", pid)`` or ``("error", text)``;
* then the parent sends batches, ``pickle.dumps((batch_id, [message tuple | None, ...]))``
  (``None`` marks a message the parent already gave up on, see the engine's docs), and
  the worker answers each with one small reply, ``(batch_id, failures, seconds)``, where
  each failure is ``(index, error type, error text, attempts)`` and ``seconds`` is how
  long the batch took; an empty payload means "exit".

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
from collections.abc import Callable, MutableSequence, Sequence
from multiprocessing.connection import Connection
from queue import SimpleQueue

from laneway.retry import ErrorInfo, RetryPolicy, call, describe
from laneway.types import Message

Handler = Callable[[Message], object]
FailureRecord = tuple[int, str, str, int]
"""A failed message of a batch: ``(index in batch, error type, error text, attempts)``."""

BATCH_ID = 0
INDEX = 1
STARTED = 2
"""Slots of the shared progress array: the batch being run, the message's index in it,
and when its current attempt started (``time.monotonic_ns()``, 0 between attempts; only
written when the policy has a timeout)."""
PROGRESS_SLOTS = 3


def run_message(handler: Handler, message: Message, policy: RetryPolicy) -> ErrorInfo | None:
    """Run ``handler`` on one message with retries: ``None`` once it returned, else how it
    failed for good. Failures are decided by :func:`laneway.retry.call`; a handler that
    raises ``KeyboardInterrupt`` (which ``call`` does not retry) fails that message too,
    so the worker survives it.
    """
    try:
        return call(handler, message, policy, _sleep)
    except BaseException as error:  # KeyboardInterrupt: a handler's error, not our crash
        name, text = describe(error)
        return name, text, 1


def run_batch(
    handler: Handler,
    policy: RetryPolicy,
    batch_id: int,
    rows: Sequence[tuple[object, ...] | None],
    progress: MutableSequence[int],
) -> list[FailureRecord]:
    """Run the handler on every row of a batch, in order; return only the failures."""
    failures: list[FailureRecord] = []
    progress[INDEX] = -1
    progress[BATCH_ID] = batch_id
    for index, row in enumerate(rows):
        if row is None:
            continue
        progress[INDEX] = index
        error = run_message(handler, Message(*row), policy)  # type: ignore[arg-type]
        if error is not None:
            failures.append((index, *error))
    progress[INDEX] = -1
    return failures


def stamped(handler: Handler, progress: MutableSequence[int]) -> Handler:
    """``handler``, recording when each attempt starts so the parent can time it out."""

    def run(message: Message) -> object:
        progress[STARTED] = time.monotonic_ns()
        try:
            return handler(message)
        finally:
            progress[STARTED] = 0

    return run


def _sleep(seconds: float) -> bool:
    time.sleep(seconds)
    return True


def worker_main(
    conn: Connection, handler_blob: bytes, policy: RetryPolicy, progress: MutableSequence[int]
) -> None:
    """Entry point of a worker process (the ``target`` of its ``Process``)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        handler = pickle.loads(handler_blob)
    except BaseException as error:  # reported to the parent, which raises
        name, text = describe(error)
        conn.send_bytes(pickle.dumps(("error", f"{name}: {text}")))
        return
    if policy.timeout is not None:
        handler = stamped(handler, progress)
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
        failures = run_batch(handler, policy, batch_id, rows, progress)
        reply = (batch_id, failures, time.perf_counter() - started)
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
