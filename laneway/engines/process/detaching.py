"""Detaching a process worker that sits in one call too long, so that its other lanes go on.

The process engine pins each lane to a worker slot. A call that does not return (a socket
without a timeout, a lock, a C call) or takes far longer than the others would hold every
lane of its slot, and the unstarted batches shipped to that worker. So when a worker has
been in one turn (a row, or a handler batch) for :data:`DETACH_AFTER` seconds, the engine's
reader thread asks it for everything it has not started (see
:mod:`laneway.engines.process.revocable`), and once the worker answers:

* what the batch's earlier turns came to is settled at once;
* every row after the running turn, and every batch not started, goes back to the front of
  the slot's queue;
* the worker leaves the slot as a :class:`Detached` worker: it finishes its turn, answers
  for it, and exits; the lanes of that turn are *held* in the slot (their later messages
  wait, so a lane never runs in two processes at once) until it answers or dies;
* a fresh worker starts in the slot and runs the rest, lane pinning unchanged.

So another key waits behind a blocked call at most ``DETACH_AFTER`` plus a worker's start
(about 0.2-0.5 s, importing the handler). The fresh worker does not have what the
detached one kept in memory, as after a crash. At most
:data:`~laneway.engines.stalled_calls.REPLACED_PER_WORKER` x ``concurrency`` workers are
detached at once, as the other engines replace stalled calls; past that, stuck calls hold
their slots (the stall watch reports them). A detached worker that dies, or is killed by
``handler_timeout``, gives its turn back to the slot (counted against the message like
any worker death or timeout).
"""

from __future__ import annotations

import pickle
import time
from collections.abc import Collection, Hashable, MutableSequence

from laneway.engines.attempts import INDEX, STARTED
from laneway.engines.lanes import LaneOf
from laneway.engines.process.reply import BatchResult
from laneway.engines.process.slot import (
    MAX_DEATHS,
    TIMED_OUT,
    WORKER_DIED,
    Attempts,
    Batch,
    Harvest,
    Slot,
    WorkerProcess,
)
from laneway.logs import get_logger
from laneway.retry import RetryPolicy, timed_out
from laneway.types import Failure, Message, Waiting, waiting_of

log = get_logger(__name__)

DETACH_AFTER = 1.0
"""Seconds a worker may sit in one turn before it is detached (see the module docs). Long
enough that a handler's ordinary slow calls do not cost a worker start each; short enough
that the lanes of its slot are not held up for long."""
LOOK_EVERY = 0.1
"""Seconds between the reader thread's looks at what each worker is running."""

Revoked = tuple[int, int, int, BatchResult, list[int]]
"""A worker's answer to a revocation (see :class:`~laneway.engines.process.revocable.Revoked`)."""


class Detached:
    """A worker taken out of its slot while it runs rows ``first``..``last`` of ``batch``."""

    __slots__ = (
        "batch", "first", "held", "killed", "last", "progress", "rows", "since", "slot", "worker",
    )  # fmt: skip

    def __init__(
        self,
        slot: Slot,
        worker: WorkerProcess,
        progress: MutableSequence[int],
        batch: Batch,
        rows: list[int],
        span: tuple[int, int],
        held: set[Hashable],
        since: float,
    ) -> None:
        self.slot = slot
        self.worker = worker
        self.progress = progress
        """The shared array the worker writes (for ``handler_timeout``)."""
        self.killed = False
        """Whether the engine killed it for running past ``handler_timeout``."""
        self.batch = batch
        self.rows = rows
        """Indices of the running turn's messages still to be settled."""
        self.first, self.last = span
        self.held = held
        """The lanes its turn holds in the slot."""
        self.since = since
        """When the running turn was first seen (``time.monotonic()``)."""

    def messages(self) -> list[Message]:
        return [self.batch.messages[i] for i in self.rows]


class Detacher:
    """Takes stuck workers out of a process engine's slots (see the module docs).

    Used from the engine's reader thread only: :meth:`look` asks stuck workers for what
    they have not started; :meth:`revoked` and :meth:`moved_on` take their answers;
    :meth:`heard_from` takes a detached worker's answer for its turn and :meth:`ended`
    its end. ``lane_of`` (``None``:
    unordered) names the lanes a detached turn holds. Tuning: none (:data:`DETACH_AFTER`).
    """

    def __init__(self, most: int, lane_of: LaneOf | None, policy: RetryPolicy) -> None:
        self._most = most
        self._lane_of = lane_of
        self._policy = policy
        self._asked: dict[int, tuple[int, int]] = {}
        """Per slot index, the row it was last asked about (never asked twice)."""
        self.attempts = Attempts()
        """Each message's attempts ended by a kill or a death, whether its worker was
        detached or not (see :meth:`Slot.bury <laneway.engines.process.slot.Slot.bury>`)."""
        self.detached: list[Detached] = []
        self.count = 0
        """Workers detached so far (they count as worker restarts)."""

    def look(self, slots: Collection[Slot], now: float) -> None:
        """Ask every worker that has been in one turn for ``DETACH_AFTER`` seconds or more
        (and was not asked about that turn yet) for what it has not started; no more while
        ``most`` workers are detached already."""
        if len(self.detached) >= self._most:
            return
        for slot in slots:
            worker = slot.worker
            if worker is None or not worker.ready or slot.asking or not slot.outstanding:
                continue
            running = slot.position(now)
            if running is None:
                continue
            where, since = running
            if now - since < DETACH_AFTER or self._asked.get(slot.index) == where:
                continue
            self._asked[slot.index] = where
            slot.asking = True
            worker.send_revoke(*where)

    def moved_on(self, slot: Slot) -> None:
        """The worker was no longer in the turn it was asked about: nothing was taken."""
        slot.asking = False

    def revoked(self, slot: Slot, answer: Revoked, harvest: Harvest) -> list[Message]:
        """The slot's worker gave back what it had not started: settle what its batch's
        earlier turns came to into ``harvest``, take the worker out of the slot (its turn's
        lanes held) and return the messages to put back at the front of the slot's queue,
        in order. The caller starts a fresh worker in the slot."""
        batch_id, first, last, before, never = answer
        worker = slot.worker
        assert worker is not None
        now = time.monotonic()
        running = slot.position(now)
        since = running[1] if running is not None else now
        slot.asking = False
        head = slot.outstanding.popleft()
        if head.id != batch_id:
            raise AssertionError(f"worker {slot.index} revoked batch {batch_id}, not {head.id}")
        others = list(slot.outstanding)
        slot.outstanding.clear()
        if sorted(b.id for b in others) != sorted(never):
            raise AssertionError(f"worker {slot.index} held batches {never}, not {others}")
        harvest.add(head, before, range(first))
        failures, _, _, results = before
        settled = set(head.gave_up)
        settled.update(index for index, *_ in failures)
        settled.update(index for indices, _ in results for index in indices)
        rows = [i for i in range(first, last + 1) if i not in settled]
        back = [head.messages[i] for i in range(last + 1, len(head)) if i not in settled]
        for batch in others:
            back += [m for i, m in enumerate(batch.messages) if i not in batch.gave_up]
        lane_of = self._lane_of
        held = set() if lane_of is None else {lane_of(head.messages[i]) for i in rows}
        slot.held |= held
        killed = slot.killed_at is not None  # its timeout kill crossed the revocation
        progress = slot.take_out()
        detached = Detached(slot, worker, progress, head, rows, (first, last), held, since)
        detached.killed = killed
        self.detached.append(detached)
        self.count += 1
        log.warning(
            "worker %d (pid %d) has been in one call on %s[%d]@%d for %.1f s: detached; its "
            "slot's other lanes (%d messages handed back) go on in a new worker",
            slot.index,
            worker.pid,
            head.messages[first].topic,
            head.messages[first].partition,
            head.messages[first].offset,
            now - since,
            len(back),
        )
        return back

    def heard_from(self, detached: Detached, harvest: Harvest) -> bool:
        """Read a detached worker's answer for its turn: settle it into ``harvest`` and
        release its lanes. False when its pipe is closed instead (it is gone)."""
        try:
            _, result, _ = pickle.loads(detached.worker.conn.recv_bytes())
        except (EOFError, OSError):
            return False
        harvest.add(detached.batch, result, detached.rows)
        self._release(detached)
        detached.rows = []
        return True

    def ended(self, detached: Detached, harvest: Harvest) -> list[Message]:
        """A detached worker is gone (reaped). If it had not answered (it died, or was
        killed by the handler timeout), its turn's messages go back to its slot, those
        given up on for good into ``harvest``; return the messages to run again."""
        self.detached.remove(detached)
        if not detached.rows:
            return []
        why = "was killed: handler timed out" if detached.killed else "died"
        log.warning("detached worker (pid %d) %s; its call runs again", detached.worker.pid, why)
        again, failed = self._died(detached, detached.killed)
        harvest.failed.extend(failed)
        return again

    def _died(self, detached: Detached, killed: bool) -> tuple[list[Message], list[Failure]]:
        """The messages of a gone detached worker's turn to run again, and those given up
        on for good (``killed``: by the handler timeout)."""
        self._release(detached)
        messages, detached.rows = detached.messages(), []
        counter = self.attempts.timeouts if killed else self.attempts.deaths
        again: list[Message] = []
        failed: list[Failure] = []
        for message in messages:
            position = (message.topic, message.partition, message.offset)
            counter[position] += 1
            count = counter[position]
            if killed and count > self._policy.max_retries:
                assert self._policy.timeout is not None
                text = f"{timed_out(self._policy.timeout)} ({count} attempts)"
                failed.append(Failure(message, TIMED_OUT, text, count))
            elif not killed and count >= MAX_DEATHS:
                text = f"the worker process died {MAX_DEATHS} times while running this message"
                failed.append(Failure(message, WORKER_DIED, text, MAX_DEATHS))
            else:
                again.append(message)
        return again, failed

    def settle(self, harvest: Harvest) -> None:
        """Forget the attempts counted for messages ``harvest`` reports finished or given
        up on: the counters hold only messages still to be run again."""
        attempts = self.attempts
        if attempts.timeouts or attempts.deaths:
            attempts.settle(harvest.finished)
            attempts.settle(failure.message for failure in harvest.failed)
            attempts.settle(message for group, _ in harvest.results for message in group)

    def kill_overdue(self, now_ns: int, timeout: float) -> None:
        """Kill each detached worker whose attempt has run longer than ``timeout``."""
        for detached in self.detached:
            started = detached.progress[STARTED]
            overdue = started and now_ns - started > timeout * 1e9
            if overdue and detached.rows and not detached.killed:
                detached.killed = True
                detached.worker.process.kill()

    def running(self) -> list[tuple[Message, float]]:
        """The turns detached workers run, each with when it was first seen."""
        return [(d.batch.messages[d.first], d.since) for d in self.detached if d.rows]

    def _release(self, detached: Detached) -> None:
        detached.slot.held -= detached.held
        detached.held = set()


def waiting_behind(
    message: Message, slots: Collection[Slot], detacher: Detacher, lane_of: LaneOf | None
) -> Waiting:
    """What cannot start until ``message``'s call returns: while its worker sits in the
    slot, everything the worker holds behind it and (ordered) every message routed to its
    slot; once detached, the queued messages of the lanes its turn holds. Call with the
    engine's lock held; the worker's batches are read as
    :func:`~laneway.engines.base.read_while_changing` reads."""
    now = time.monotonic()
    for slot in slots:
        running = slot.running(now)
        if running is None or running[0] != message:
            continue
        behind: list[Message] = []
        for number, batch in enumerate(list(slot.outstanding)):
            rows = batch.messages[slot.progress[INDEX] + 1 :] if number == 0 else batch.messages
            behind += rows
        if lane_of is not None:
            behind += slot.queue
        return waiting_of(behind)
    for detached in detacher.detached:
        if detached.rows and detached.batch.messages[detached.first] == message:
            if lane_of is None:
                return Waiting()
            held = detached.held
            return waiting_of(m for m in detached.slot.queue if lane_of(m) in held)
    return Waiting()
