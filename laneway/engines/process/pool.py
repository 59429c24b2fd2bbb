"""The process engine's worker processes: started into their slots, waited for, detached,
stopped, and killed at interpreter exit if nobody closed the engine.

:class:`WorkerPool` maps what the engine's reader thread waits on (each worker's pipe and
process sentinel) to the slot, or the detached worker, it belongs to. Only the reader
thread (or ``start`` before it exists) calls it, but for :meth:`WorkerPool.kill`, which
the exit handler may call from anywhere.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from multiprocessing.connection import Connection, wait
from multiprocessing.context import SpawnContext
from typing import cast

from laneway.engines.handler_checks import import_advice
from laneway.engines.process.detaching import Detached, Detacher
from laneway.engines.process.slot import OPEN_FAILED, Slot, WorkerProcess, kill_all, stop_all
from laneway.errors import HandlerImportError, LanewayError
from laneway.retry import RetryPolicy

START_TIMEOUT = 60.0
"""Seconds ``start()`` waits for every worker to import the handler."""

Waitable = Connection | int
"""What the reader waits on: a worker's pipe, or its process sentinel."""


class WorkerPool:
    """The worker processes of a process engine's ``slots`` and of its detached workers.

    Tuning: none (:data:`START_TIMEOUT` bounds the start).
    """

    def __init__(
        self,
        slots: Sequence[Slot],
        ctx: SpawnContext,
        policy: RetryPolicy,
        detacher: Detacher,
    ) -> None:
        self._slots = slots
        self._ctx = ctx
        self._policy = policy
        self._detacher = detacher
        self.blob = b""
        """The pickled handler (set before the first :meth:`spawn`)."""
        self.slots_of: dict[Waitable, Slot] = {}
        self.detached_of: dict[Waitable, Detached] = {}
        self._lock = threading.Lock()
        self.killed = False
        """Whether the exit handler killed them all (no worker is started after that)."""

    def waitables(self) -> list[Waitable]:
        return [*self.slots_of, *self.detached_of]

    def spawn(self, slot: Slot) -> None:
        """Start a worker in ``slot`` (unless the pool was killed at exit)."""
        with self._lock:
            if self.killed:
                return
            worker = slot.spawn(self._ctx, self.blob, self._policy)
        self.slots_of[worker.conn] = slot
        self.slots_of[worker.sentinel] = slot

    def await_ready(self, name: str, deadline: float) -> None:
        """Wait until every slot's worker said it is ready; raise why one cannot start."""
        while not all(s.worker is not None and s.worker.ready for s in self._slots):
            ready = wait(list(self.slots_of), max(deadline - time.monotonic(), 0.0))
            if not ready:
                raise LanewayError(f"process engine workers did not start in {START_TIMEOUT} s")
            for obj in ready:
                worker = self.slots_of[cast(Waitable, obj)].worker
                assert worker is not None
                try:
                    error = worker.handshake(worker.conn.recv_bytes())
                except (EOFError, OSError):
                    raise LanewayError(
                        f"process engine worker exited with code {worker.reap()} during "
                        "start-up (see its traceback above); if your main module starts the "
                        "consumer when imported, guard that with `if __name__ == '__main__':` "
                        "- workers are spawned and import the main module again"
                    ) from None
                if error is not None and error.startswith(OPEN_FAILED):
                    raise LanewayError(f"handler {name} could not start in a worker: {error}")
                if error is not None:
                    raise HandlerImportError(import_advice(name, f"a worker reported {error}"))

    def forget(self, worker: WorkerProcess) -> None:
        """A slot's worker died: stop waiting on it."""
        del self.slots_of[worker.conn], self.slots_of[worker.sentinel]

    def detach(self, worker: WorkerProcess, detached: Detached) -> None:
        """A slot's worker was detached: what it sends now is read as a detached worker's."""
        self.forget(worker)
        self.detached_of[worker.conn] = self.detached_of[worker.sentinel] = detached

    def gone(self, detached: Detached) -> None:
        """A detached worker exited or died: stop waiting on it and reap it."""
        worker = detached.worker
        del self.detached_of[worker.conn], self.detached_of[worker.sentinel]
        worker.reap()

    def stop(self, grace: float) -> None:
        """Wait up to ``grace`` seconds for every worker to exit, then kill the rest."""
        detached = [d.worker for d in self._detacher.detached]
        stop_all([s.worker for s in self._slots if s.worker is not None] + detached, grace)
        for slot in self._slots:
            slot.worker = None
        self.slots_of.clear()
        self.detached_of.clear()

    def kill(self) -> None:
        """Kill every worker and start none again: the workers of an engine nobody closed,
        at interpreter exit (or when the engine is garbage-collected)."""
        with self._lock:
            self.killed = True
            workers = [slot.worker for slot in self._slots if slot.worker is not None]
            kill_all(workers + [d.worker for d in self._detacher.detached])
