"""The process engine: a pool of worker processes for CPU-bound handlers.

How it works. ``concurrency`` worker processes are started with the ``spawn`` start
method (never ``fork``: the parent may run librdkafka threads) and kept for the
engine's life, across rebalances. Each has one duplex pipe. The parent ships *batches*
(one pickled list of message tuples per send, sized to run about 50 ms) and each worker
answers a batch with one small reply carrying only its failures; two batches are
outstanding per worker so a worker never waits for the parent's round trip. One reader
thread in the parent waits on every pipe and process sentinel, reports whole batches
through :class:`~laneway.engines.base.Completions`, and tops workers up from their
queues (:mod:`laneway.engines.process.batching` cuts the batches); the control
thread's :meth:`ProcessEngine.submit` only routes messages and wakes it.

Ordering. With ``ordering="key"`` or ``"partition"`` a lane is pinned to one worker
slot for the engine's life (dealt out evenly when first seen, see
:mod:`laneway.engines.process.placement`), so a lane always runs in the same worker
process, in order, and worker-local per-key state is safe; a slow key delays only the
keys pinned to the same worker (a retry backoff, which sleeps in the worker, too).
With ``"unordered"`` any idle worker takes the next messages.

Failures and crashes. Handlers run through :func:`laneway.retry.call` in the worker: an
exception (any ``BaseException``; ``SystemExit`` and ``KeyboardInterrupt`` too, and the
worker keeps running) is retried per the policy, then fails that message only. If a
worker process dies, a replacement is started in the same slot (lane pinning holds) and
every batch the dead worker held is sent again, in order: messages of those batches may
run twice (at-least-once), and none is reported finished unless a worker replied for
it. A message that kills its worker three times is reported failed (``"WorkerDied"``);
with ``policy.timeout``, an attempt that runs too long gets its worker killed and
replaced. See :mod:`laneway.engines.process.slot`.

Signals. Workers leave SIGINT and SIGTERM to the parent (see
:mod:`laneway.engines.process.worker`): a signal sent to the whole process group stops
the consumer once, through the parent, which drains the workers and closes each one
(its handler's ``close()`` runs once per worker); no worker dies of it and none is
replaced.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import pickle
import threading
import time
from collections import deque
from collections.abc import Callable, Collection, Sequence
from multiprocessing.connection import wait
from multiprocessing.util import Finalize
from typing import cast

from laneway.engines.admission.gate import Limits
from laneway.engines.attempts import AttemptHook
from laneway.engines.base import Completions, ResultGroup, read_while_changing
from laneway.engines.handler_checks import describe_handler, import_advice
from laneway.engines.lanes import lane_function
from laneway.engines.process.batching import Batcher
from laneway.engines.process.detaching import LOOK_EVERY, Detached, Detacher, waiting_behind
from laneway.engines.process.placement import LanePlacement
from laneway.engines.process.pool import START_TIMEOUT, Waitable, WorkerPool
from laneway.engines.process.reply import BatchResult
from laneway.engines.process.slot import (
    Harvest,
    Slot,
    WorkerProcess,
)
from laneway.engines.process.worker import MOVED_ON, REVOKED
from laneway.engines.stalled_calls import REPLACED_PER_WORKER
from laneway.errors import HandlerImportError, LanewayError
from laneway.logs import get_logger
from laneway.options import NullKeys, Ordering, whole_number
from laneway.retry import RetryPolicy
from laneway.types import Message, PartitionId, Waiting

log = get_logger(__name__)


class ProcessEngine:
    """Runs a module-level handler in ``concurrency`` worker processes (escapes the GIL).

    Use it for CPU-bound handlers. The handler must be importable by name (a
    module-level function; not a lambda or nested function), else :meth:`start` raises
    :class:`~laneway.errors.HandlerImportError`; a script using it needs the usual
    ``if __name__ == "__main__":`` guard, since workers import the main module. Workers
    are daemonic, so a handler cannot start child processes of its own. ``policy``
    (default: one attempt, no timeout) sets retries and the per-attempt timeout.

    Tuning: ``concurrency`` is the number of processes, normally the core count; at most
    ``concurrency`` handlers execute at once (one per process). Messages are shipped in
    batches sized to run about ``BATCH_SECONDS`` (measured as the engine runs; at most
    ``MAX_BATCH``) with ``PIPELINE`` batches per worker, so :attr:`in_flight` (sent, not
    yet reported) is at most ``MAX_BATCH * PIPELINE * concurrency`` and drains in about
    ``PIPELINE * BATCH_SECONDS`` plus one handler call (see
    :mod:`laneway.engines.process.batching`).
    """

    def __init__(
        self,
        handler: Callable[[Message], object],
        ordering: Ordering,
        concurrency: int,
        policy: RetryPolicy | None = None,
        hooks: Sequence[AttemptHook] = (),
        timed: bool = False,
        batch_size: int | None = None,
        batch_wait: float = 0.0,
        limits: Limits | None = None,
        null_keys: NullKeys = NullKeys.PARTITION,
    ) -> None:
        self._handler = handler
        self._batch_size = batch_size
        # A stateful handler ships each message's state with it and takes the new one
        # back as soon as a reply is read (see laneway.state.shipping).
        self._harvested: Callable[[list[ResultGroup]], None] | None = getattr(
            handler, "harvested", None
        )
        ship = getattr(handler, "ship", None)
        self._batcher = Batcher(ordering, batch_size, batch_wait, null_keys, ship)
        self._hooks = tuple(hooks)
        self._timed = timed
        self._limits = limits
        self._n = whole_number(concurrency, "concurrency")
        self._policy = policy if policy is not None else RetryPolicy(max_retries=0)
        timeout = self._policy.timeout
        self._tick = 1.0 if timeout is None else min(max(timeout / 4, 0.005), 1.0)
        self._busy_tick = min(self._tick, LOOK_EVERY)
        self._ctx = multiprocessing.get_context("spawn")
        shared: deque[Message] = deque()
        self._slots = [
            Slot(i, shared if ordering is Ordering.UNORDERED else deque(), self._ctx)
            for i in range(self._n)
        ]
        self._lock = threading.Condition()  # guards queues, _in_flight and the flags
        self._completions = Completions()
        self._blob = b""
        self._wake_r, self._wake_w = self._ctx.Pipe(duplex=False)
        self._wake_pending = False
        self._in_flight = 0
        self._restarts = 0
        lane_of = lane_function(ordering, null_keys)
        self._placement = (
            None if lane_of is None or self._n == 1 else LanePlacement(self._n, lane_of)
        )
        self._lane_of = lane_of
        self._detacher = Detacher(REPLACED_PER_WORKER * self._n, lane_of, self._policy)
        self._pool = WorkerPool(self._slots, self._ctx, self._policy, self._detacher)
        self._reader: threading.Thread | None = None
        self._at_exit: Finalize[None] | None = None
        self._started = self._closing = self._stopping = self._closed = False

    @property
    def in_flight(self) -> int:
        """Messages sent to workers and not yet reported (not all of them executing)."""
        return self._in_flight

    @property
    def worker_restarts(self) -> int:
        """How many times a worker process was replaced: it died, timed out, or was
        detached from a call that ran too long (see :mod:`.detaching`)."""
        return self._restarts + self._detacher.count

    def running(self) -> list[tuple[Message, float]]:
        now = time.monotonic()
        running = [item for slot in self._slots if (item := slot.running(now)) is not None]
        return running + self._detacher.running()

    def waiting_behind(self, messages: list[Message]) -> list[Waiting]:
        def read() -> list[Waiting]:
            slots, detacher, lane_of = self._slots, self._detacher, self._lane_of
            return [waiting_behind(m, slots, detacher, lane_of) for m in messages]

        with self._lock:
            return read_while_changing(read, [Waiting() for _ in messages])

    @property
    def worker_pids(self) -> list[int]:
        """Process ids of the current workers (0 for a slot being restarted)."""
        return [s.worker.pid if s.worker is not None else 0 for s in self._slots]

    def start(self, completions: Completions) -> None:
        if self._started:
            raise RuntimeError("ProcessEngine.start() called twice")
        self._started = True
        self._completions = completions
        name = describe_handler(self._handler)
        try:
            blob = (self._handler, self._hooks, self._timed, self._batch_size, self._limits)
            self._pool.blob = pickle.dumps(blob, protocol=5)
        except Exception as error:
            raise HandlerImportError(
                import_advice(name, f"it cannot be pickled: {error}")
            ) from error
        # Workers leave SIGTERM to the parent, so multiprocessing's own exit handler,
        # which terminates daemonic children and then joins them, would wait forever for
        # workers of an engine nobody closed: kill those first (finalizers with an exit
        # priority run before that handler terminates anything).
        self._at_exit = Finalize(self, self._pool.kill, exitpriority=0)
        for slot in self._slots:
            self._pool.spawn(slot)
        try:
            self._pool.await_ready(name, time.monotonic() + START_TIMEOUT)
        except BaseException:
            self._stop_workers(0.0)
            raise
        self._reader = threading.Thread(target=self._run, name="laneway-process", daemon=True)
        self._reader.start()

    def submit(self, messages: list[Message]) -> None:
        if self._closing:
            raise RuntimeError("ProcessEngine.submit() after close()")
        if not messages:
            return
        buckets = self._route(messages)
        now = time.monotonic()
        with self._lock:
            for slot, bucket in zip(self._slots, buckets, strict=False):
                self._batcher.add(slot.queue, bucket, now)
            if self._wake_pending:
                return
            self._wake_pending = True
        self._wake_w.send_bytes(b"w")

    def cancel(self, partitions: Collection[PartitionId]) -> list[Message]:
        wanted = set(partitions)
        dropped: list[Message] = []
        with self._lock:
            for queue in {id(slot.queue): slot.queue for slot in self._slots}.values():
                kept = [m for m in queue if (m.topic, m.partition) not in wanted]
                if len(kept) != len(queue):
                    dropped.extend(m for m in queue if (m.topic, m.partition) in wanted)
                    queue.clear()
                    queue.extend(kept)
        dropped.sort(key=lambda m: (m.topic, m.partition, m.offset))
        return dropped

    def close(self, timeout: float) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = self._closing = True
            deadline = time.monotonic() + max(timeout, 0.0)
            if self._reader is not None:
                self._lock.wait_for(lambda: self._in_flight == 0, max(timeout, 0.0))
            drained = self._in_flight == 0
            self._stopping = True
        if self._reader is not None:
            self._wake_w.send_bytes(b"w")
            self._reader.join(1.0)  # it tells the workers to exit on its way out
        self._stop_workers(max(deadline - time.monotonic(), 1.0) if drained else 0.0)
        if self._reader is not None:
            self._reader.join(1.0)
        self._wake_r.close()
        self._wake_w.close()

    def _route(self, messages: list[Message]) -> list[list[Message]]:
        """Split ``messages`` by worker slot (unordered: all into the shared queue)."""
        if self._placement is None:
            return [messages]
        return self._placement.route(messages)

    def _run(self) -> None:
        """The reader thread: replies, deaths, restarts and top-ups, until close()."""
        limit = self._policy.timeout
        while True:
            with self._lock:
                if self._stopping:
                    break
            now = time.monotonic()
            timers = [s.restart_at - now for s in self._slots if s.restart_at is not None]
            if self._batcher.holds_back:
                with self._lock:
                    timers.extend(self._batcher.filled_in(self._slots, now))
            tick = self._busy_tick if self._in_flight else self._tick
            timeout = max(min(timers, default=tick), 0.0)
            ready = wait([self._wake_r, *self._pool.waitables()], timeout)
            harvest = Harvest()
            for obj in ready:
                if obj is self._wake_r:
                    self._wake_r.recv_bytes()
                    with self._lock:
                        self._wake_pending = False
                    continue
                detached = self._pool.detached_of.get(cast(Waitable, obj))
                if detached is not None:
                    self._from_detached(detached, obj is detached.worker.conn, harvest)
                    continue
                slot = self._pool.slots_of.get(cast(Waitable, obj))
                if slot is None or slot.worker is None:
                    continue  # a dead worker's other half, already handled
                if obj is slot.worker.conn:
                    self._receive(slot, slot.worker, harvest)
                else:
                    self._on_death(slot, slot.worker, harvest)
            self._report(harvest)
            self._detacher.look(self._slots, time.monotonic())
            if limit is not None:
                now_ns = time.monotonic_ns()
                for slot in self._slots:
                    slot.kill_if_overdue(now_ns, limit)
                self._detacher.kill_overdue(now_ns, limit)
            for slot in self._slots:
                if slot.restart_at is not None and slot.restart_at <= time.monotonic():
                    self._pool.spawn(slot)
            self._dispatch()
        for slot in self._slots:
            if slot.worker is not None:
                slot.worker.send_stop()

    def _receive(self, slot: Slot, worker: WorkerProcess, harvest: Harvest) -> None:
        try:
            while True:
                data = worker.conn.recv_bytes()
                if worker.ready:
                    self._on_message(slot, worker, data, harvest)
                    if slot.worker is not worker:
                        return  # detached: what it sends now is read as such
                elif (error := worker.handshake(data)) is not None:
                    log.error("replacement worker %d cannot start: %s", slot.index, error)
                    return  # it exits; its sentinel brings it back to _on_death
                else:
                    for batch in slot.outstanding:
                        worker.send_batch(batch)
                if not worker.conn.poll():
                    return
        except (EOFError, OSError):
            self._on_death(slot, worker, harvest)

    def _on_message(self, slot: Slot, worker: WorkerProcess, data: bytes, harvest: Harvest) -> None:
        """A ready worker's message: a batch's answer, or its answer to a revocation."""
        message = pickle.loads(data)
        kind = message[0]
        if kind == REVOKED:
            back = self._detacher.revoked(slot, message[1:], harvest)
            self._put_back(slot, back)
            self._pool.detach(worker, self._detacher.detached[-1])
        elif kind == MOVED_ON:
            self._detacher.moved_on(slot)
        else:
            self._on_reply(slot, message, harvest)

    def _from_detached(self, detached: Detached, readable: bool, harvest: Harvest) -> None:
        """A detached worker answered for its turn, or is gone (see :class:`Detacher`)."""
        if readable and self._detacher.heard_from(detached, harvest):
            return
        self._pool.gone(detached)
        self._put_back(detached.slot, self._detacher.ended(detached, harvest))

    def _put_back(self, slot: Slot, messages: list[Message]) -> None:
        """Messages sent to a worker and taken back unstarted: at the front of the slot's
        queue, ahead of what was queued since (their lanes' later messages)."""
        if not messages:
            return
        with self._lock:
            slot.queue.extendleft(reversed(messages))
            self._in_flight -= len(messages)

    def _on_reply(
        self, slot: Slot, reply: tuple[int, BatchResult, float], harvest: Harvest
    ) -> None:
        batch_id, result, seconds = reply
        batch = slot.outstanding.popleft()
        if batch.id != batch_id:
            raise LanewayError(f"worker {slot.index} answered batch {batch_id}, not {batch.id}")
        slot.dead_streak = 0
        self._batcher.measure(seconds, len(batch.messages) - len(batch.gave_up))
        harvest.add(batch, result)

    def _report(self, harvest: Harvest) -> None:
        count = harvest.count
        if not count:
            return
        if self._harvested is not None and harvest.results:
            self._harvested(harvest.results)
        self._completions.report(
            harvest.finished, harvest.failed, harvest.durations, harvest.retries, harvest.results
        )
        self._detacher.settle(harvest)
        with self._lock:
            self._in_flight -= count
            if self._in_flight == 0:
                self._lock.notify_all()
                self._completions.wake()  # a drain waits for in_flight == 0

    def _on_death(self, slot: Slot, worker: WorkerProcess, harvest: Harvest) -> None:
        """Reap a dead worker (after reading the replies it sent), let the slot decide."""
        with contextlib.suppress(EOFError, OSError):
            while worker.ready and worker.conn.poll():
                self._on_message(slot, worker, worker.conn.recv_bytes(), harvest)
                if slot.worker is not worker:
                    return  # it was detached: its death is read as a detached worker's
        self._pool.forget(worker)
        code = worker.reap()
        if slot.killed_at is not None:
            log.warning("worker %d (pid %d) killed: handler timed out", slot.index, worker.pid)
        else:
            log.warning("worker %d (pid %d) died with exit code %s", slot.index, worker.pid, code)
        self._restarts += 1
        slot.asking = False
        harvest.failed.extend(slot.bury(worker, self._policy, self._detacher.attempts))

    def _dispatch(self) -> None:
        """Move queued messages into batches for workers with a free pipeline place."""
        with self._lock:
            if self._closing:
                return
            plan = self._batcher.cut(self._slots, time.monotonic())
            self._in_flight += sum(len(batch.messages) for _, batch in plan)
        for worker, batch in plan:
            worker.send_batch(batch)

    def _stop_workers(self, grace: float) -> None:
        self._pool.stop(grace)
        if self._at_exit is not None:
            self._at_exit.cancel()
