"""The parent's side of one process engine worker: the slot it fills, and what happens
when it dies.

A :class:`Slot` is a fixed position in the pool. It owns the queue of messages routed
to it (so lane pinning survives a worker's death), the :class:`Batch` es its worker
holds, and a small shared progress array the worker writes before each message. The
:class:`WorkerProcess` in it may be replaced any number of times.

Crash policy. When a worker dies, the message it was running (read from the progress
array) gets a strike, counted per message across batches (:class:`Attempts`: a message
handed back by a stuck worker is sent again in another batch); after ``MAX_DEATHS``
strikes it is given up and reported failed
with error type ``"WorkerDied"`` (if the running message is unknown, the strike goes to
the whole batch). With a handler timeout, the parent kills a worker whose attempt runs
too long; that counts as one failed attempt of that message, which is given up with
error type ``"TimeoutError"`` after the policy's last attempt. Replacements start at
once, or after a growing delay (up to 5 s) while a slot keeps dying without progress.

Only the engine's reader thread (or ``start`` before it exists) touches a slot's worker
and batches; the queue is guarded by the engine's lock.
"""

from __future__ import annotations

import contextlib
import pickle
import signal
import time
from collections import Counter, deque
from collections.abc import Callable, Hashable, Iterable, MutableSequence, Sequence
from multiprocessing.context import SpawnContext

from laneway.engines.attempts import BATCH_ID, INDEX, PROGRESS_SLOTS, STARTED
from laneway.engines.base import ResultGroup
from laneway.engines.process.reply import BatchResult, FailureRecord, ResultRecord
from laneway.engines.process.worker import PARENTS_SIGNALS, REVOKE, worker_main
from laneway.retry import RetryPolicy, timed_out
from laneway.types import Failure, Message

Position = tuple[str, int, int]
"""A message's topic, partition and offset."""

MAX_DEATHS = 3
"""Worker deaths while one message (or batch) runs before it is reported failed."""
WORKER_DIED = "WorkerDied"
OPEN_FAILED = "open failed: "
"""The start of a handshake error that comes from the handler's ``open()``."""
TIMED_OUT = "TimeoutError"

_row: type[tuple[object, ...]] = tuple
"""A message as the plain tuple a batch ships it as (Message is a named tuple)."""
Ship = Callable[[int, list[Message]], list[tuple[object, ...]]]
"""Rows of a batch (its id, its messages) as sent to a worker."""


class Attempts:
    """Per message (by :data:`Position`), its attempts that ended with its worker killed
    for running past ``handler_timeout`` (``timeouts``) and those that ended with its
    worker dying (``deaths``). Kept by the engine, not the batch: a message a stuck worker
    hands back is sent again in another batch, and its attempts must add up whichever
    way, attached or detached, each one ended. :meth:`settle` forgets a message once it
    is finished or given up on."""

    __slots__ = ("deaths", "timeouts")

    def __init__(self) -> None:
        self.deaths: Counter[Position] = Counter()
        self.timeouts: Counter[Position] = Counter()

    def settle(self, messages: Iterable[Message]) -> None:
        if not self.timeouts and not self.deaths:
            return
        for message in messages:
            position = (message.topic, message.partition, message.offset)
            self.timeouts.pop(position, None)
            self.deaths.pop(position, None)


class Batch:
    """Messages shipped to a worker as one unit; the parent keeps it until the worker answers.

    If the worker dies, the batch is sent again to its replacement, in order, without the
    messages already given up on (they travel as ``None``).
    """

    __slots__ = ("deaths", "gave_up", "id", "messages", "ship")

    def __init__(self, batch_id: int, messages: list[Message], ship: Ship | None = None) -> None:
        self.id = batch_id
        self.messages = messages
        self.ship = ship
        """Makes the rows when the batch is sent (a stateful handler's: each message with its
        key's state as it is then); ``None``: plain tuples."""
        self.gave_up: set[int] = set()  # indices already reported failed
        self.deaths = 0  # worker deaths while an unknown message of the batch ran

    def rows(self) -> list[tuple[object, ...] | None]:
        rows: list[tuple[object, ...] | None]
        if self.ship is None:
            rows = list(map(_row, self.messages))
        else:
            rows = list(self.ship(self.id, self.messages))
        for index in self.gave_up:
            rows[index] = None
        return rows

    def settle(
        self, failures: list[FailureRecord], results: list[ResultRecord], covered: Sequence[int]
    ) -> tuple[list[Message], list[Failure], list[ResultGroup], set[int]]:
        """Split what a worker answered for the rows ``covered`` (the whole batch, or the
        part a revocation settles) into finished messages (without results), failures and
        result groups; also return the indices not finished plainly."""
        if not failures and not self.gave_up and not results and len(covered) == len(self):
            return self.messages, [], [], set()
        skip = set(self.gave_up)
        failed = []
        for index, error_type, text, attempts, trace in failures:
            skip.add(index)
            failed.append(Failure(self.messages[index], error_type, text, attempts, trace))
        groups: list[ResultGroup] = []
        for indices, records in results:
            skip.update(indices)
            groups.append(([self.messages[i] for i in indices], records))
        messages = self.messages
        done = [messages[i] for i in covered if i not in skip]
        return done, failed, groups, skip

    def __len__(self) -> int:
        return len(self.messages)

    def all_given_up(self) -> bool:
        return len(self.gave_up) == len(self.messages)

    def give_up(
        self, indices: list[int], error_type: str, text: str, attempts: int
    ) -> list[Failure]:
        fresh = [i for i in indices if i not in self.gave_up]
        self.gave_up.update(fresh)
        return [Failure(self.messages[i], error_type, text, attempts) for i in fresh]


class WorkerProcess:
    """The parent's handle on one worker process: start it, talk to it, reap it."""

    def __init__(
        self,
        ctx: SpawnContext,
        handler_blob: bytes,
        policy: RetryPolicy,
        progress: MutableSequence[int],
        name: str,
    ) -> None:
        self.conn, child_end = ctx.Pipe(duplex=True)
        args = (child_end, handler_blob, policy, progress)
        self.process = ctx.Process(target=worker_main, args=args, name=name, daemon=True)
        # The worker inherits this thread's signal mask: with the signals it leaves to the
        # parent blocked, one sent to the process group while its interpreter starts waits
        # for the worker's own handler (see leave_signals_to_the_parent); this process
        # receives it on another thread, or once the mask is restored.
        previous = signal.pthread_sigmask(signal.SIG_BLOCK, PARENTS_SIGNALS)
        try:
            self.process.start()
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, previous)
        child_end.close()
        self.sentinel = self.process.sentinel
        self.pid = 0
        self.ready = False

    def handshake(self, data: bytes) -> str | None:
        """Read the worker's first message: ``None`` when it is ready, else its error text
        (starting with :data:`OPEN_FAILED` when the handler's ``open()`` raised)."""
        kind, detail = pickle.loads(data)
        if kind == "open-failed":
            return f"{OPEN_FAILED}{detail}"
        if kind != "ready":
            return str(detail)
        self.ready, self.pid = True, int(detail)
        return None

    def send_batch(self, batch: Batch) -> None:
        """Ship a batch; a dead worker is noticed through its sentinel, not here."""
        with contextlib.suppress(OSError):
            self.conn.send_bytes(pickle.dumps((batch.id, batch.rows()), protocol=5))

    def send_revoke(self, batch_id: int, index: int) -> None:
        """Ask for what it has not started (see :mod:`laneway.engines.process.detaching`)."""
        with contextlib.suppress(OSError):
            self.conn.send_bytes(pickle.dumps((REVOKE, batch_id, index), protocol=5))

    def send_stop(self) -> None:
        with contextlib.suppress(OSError):
            self.conn.send_bytes(b"")

    def reap(self) -> int | None:
        """Make sure the process is gone (killing it if needed); its exit code."""
        self.process.join(1.0)
        if self.process.is_alive():
            self.process.kill()
            self.process.join(1.0)
        self.conn.close()
        return self.process.exitcode


class Harvest:
    """What one turn of the engine's reader thread collected from its workers: finished
    and failed messages, handler times (with their topics) and retries, reported as one."""

    __slots__ = ("durations", "failed", "finished", "results", "retries")

    def __init__(self) -> None:
        self.finished: list[Message] = []
        self.failed: list[Failure] = []
        self.durations: list[float] = []
        self.retries: dict[str, int] = {}
        self.results: list[ResultGroup] = []

    @property
    def count(self) -> int:
        """Messages reported by this harvest (finished, failed or with results)."""
        return len(self.finished) + len(self.failed) + sum(len(g) for g, _ in self.results)

    def add(self, batch: Batch, result: BatchResult, covered: Sequence[int] | None = None) -> None:
        """A worker's answer to ``batch``: for all of it, or for the rows ``covered``."""
        failures, durations, retried, results = result
        covered = range(len(batch)) if covered is None else covered
        done, bad, groups, skip = batch.settle(failures, results, covered)
        self.finished.extend(done)
        self.failed.extend(bad)
        self.results.extend(groups)
        if durations:
            self.durations.extend(seconds for i, seconds in durations if i not in skip)
        for index, count in retried:
            topic = batch.messages[index].topic
            self.retries[topic] = self.retries.get(topic, 0) + count


def stop_all(workers: list[WorkerProcess], grace: float) -> None:
    """Wait up to ``grace`` s for workers to exit, then kill them (they leave SIGTERM to
    the parent, so terminating them would do nothing)."""
    deadline = time.monotonic() + grace
    for worker in workers:
        worker.process.join(max(deadline - time.monotonic(), 0.0))
    kill_all(workers)


def kill_all(workers: list[WorkerProcess]) -> None:
    """Kill the workers still alive and reap them all."""
    for worker in workers:
        if worker.process.is_alive():
            worker.process.kill()
    for worker in workers:
        worker.reap()


class Slot:
    """One worker position: its queue and batches outlive its process (see module docs)."""

    def __init__(self, index: int, queue: deque[Message], ctx: SpawnContext) -> None:
        self.index = index
        self.queue = queue
        self._ctx = ctx
        self.progress = _progress_array(ctx)
        self.outstanding: deque[Batch] = deque()
        self.worker: WorkerProcess | None = None
        self.dead_streak = 0
        self.restart_at: float | None = None
        self.killed_at: tuple[int, int] | None = None  # (batch, index) that timed out
        self.asking = False
        """Whether its worker was asked for what it has not started and did not answer
        yet (nothing is shipped to it meanwhile)."""
        self.held: set[Hashable] = set()
        """Lanes a detached worker still runs: their queued messages wait."""
        self._seen: tuple[tuple[int, int], float] | None = None  # running (batch, index), since

    def spawn(self, ctx: SpawnContext, handler_blob: bytes, policy: RetryPolicy) -> WorkerProcess:
        name = f"laneway-{self.index}"
        self.worker = WorkerProcess(ctx, handler_blob, policy, self.progress, name)
        self.restart_at = None
        self._seen = None  # a new worker's clock: the row its predecessor ran may run again
        return self.worker

    def running(self, now: float) -> tuple[Message, float] | None:
        """The message this slot's worker is running, with when that was first seen by a
        call (workers stamp no times per message: the engine's reader, looking every
        :data:`~laneway.engines.process.detaching.LOOK_EVERY` seconds while work is out,
        and the stall watch are the clock). Safe from any thread."""
        position = self.position(now)
        if position is None:
            return None
        (_, index), since = position
        return self.outstanding[0].messages[index], since

    def position(self, now: float) -> tuple[tuple[int, int], float] | None:
        """The ``(batch id, index)`` this slot's worker is running, with when that was
        first seen (see :meth:`running`)."""
        batch_id, index = self.progress[BATCH_ID], self.progress[INDEX]
        try:
            head = self.outstanding[0]
        except IndexError:
            return None
        if index < 0 or head.id != batch_id or index >= len(head.messages):
            return None
        seen = self._seen
        if seen is None or seen[0] != (batch_id, index):
            seen = self._seen = ((batch_id, index), now)
        return seen

    def take_out(self) -> MutableSequence[int]:
        """Its worker was detached: the slot gets a fresh progress array and a new worker
        at once (see :meth:`spawn`); return the detached worker's progress array."""
        progress = self.progress
        self.progress = _progress_array(self._ctx)
        self.worker = None
        self.killed_at = None  # a kill in flight is the detached worker's now
        self._seen = None
        self.dead_streak = 0
        self.restart_at = time.monotonic()
        return progress

    def kill_if_overdue(self, now_ns: int, timeout: float) -> None:
        """Kill the worker if its current handler attempt has run longer than ``timeout``."""
        started = self.progress[STARTED]
        if self.worker is None or not started or self.killed_at is not None:
            return
        if now_ns - started > timeout * 1e9:
            self.killed_at = (self.progress[BATCH_ID], self.progress[INDEX])
            self.worker.process.kill()

    def bury(self, dead: WorkerProcess, policy: RetryPolicy, attempts: Attempts) -> list[Failure]:
        """Account for a dead (reaped) worker and schedule its replacement; return the
        messages given up on because of it. ``attempts``: each message's attempts ended
        by a kill or a death, shared with the detached workers'."""
        self.worker = None
        failed: list[Failure] = []
        if self.killed_at is not None:
            failed = self._expire(self.killed_at, policy, attempts.timeouts)
        else:
            self.dead_streak += 1
            if self.outstanding and dead.ready:
                failed = self._strike(attempts.deaths)
        if self.outstanding and self.outstanding[0].all_given_up():
            self.outstanding.popleft()
        self.killed_at = None
        self.progress[INDEX] = -1
        self.progress[STARTED] = 0
        streak = self.dead_streak
        delay = 0.0 if streak <= 1 else min(0.1 * 2 ** (streak - 2), 5.0)
        self.restart_at = time.monotonic() + delay
        return failed

    def _strike(self, deaths: Counter[Position]) -> list[Failure]:
        """Count a death against the message (or, if unknown, the batch) that was running."""
        head = self.outstanding[0]
        running = self.progress[INDEX]
        if self.progress[BATCH_ID] == head.id and 0 <= running < len(head.messages):
            message = head.messages[running]
            position = (message.topic, message.partition, message.offset)
            deaths[position] += 1
            doomed = [running] if deaths[position] >= MAX_DEATHS else []
            what = "this message"
        else:
            head.deaths += 1
            doomed = list(range(len(head.messages))) if head.deaths >= MAX_DEATHS else []
            what = "this message's batch"
        text = f"the worker process died {MAX_DEATHS} times while running {what}"
        return head.give_up(doomed, WORKER_DIED, text, MAX_DEATHS)

    def _expire(
        self, killed_at: tuple[int, int], policy: RetryPolicy, timeouts: Counter[Position]
    ) -> list[Failure]:
        """Count a timed-out attempt; give the message up after its last allowed attempt."""
        batch_id, index = killed_at
        if not self.outstanding or self.outstanding[0].id != batch_id or index < 0:
            return []  # it finished just before the kill
        head = self.outstanding[0]
        message = head.messages[index]
        position = (message.topic, message.partition, message.offset)
        timeouts[position] += 1
        count = timeouts[position]
        if count <= policy.max_retries:
            return []
        assert policy.timeout is not None
        text = f"{timed_out(policy.timeout)} ({count} attempts)"
        return head.give_up([index], TIMED_OUT, text, count)


def _progress_array(ctx: SpawnContext) -> MutableSequence[int]:
    """A worker's shared progress array (see :mod:`laneway.engines.attempts`), nothing run."""
    progress: MutableSequence[int] = ctx.RawArray("q", PROGRESS_SLOTS)
    progress[INDEX] = -1
    return progress
