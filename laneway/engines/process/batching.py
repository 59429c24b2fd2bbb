"""How the process engine cuts its queued messages into batches for its workers.

A batch is sized to run about ``BATCH_SECONDS`` in a worker, by a moving average of the
handler seconds per message that workers report (one message per batch until the first
reply; at most ``MAX_BATCH``), and a worker holds at most ``PIPELINE`` batches, so it
never waits for the parent's round trip. Queued work is shared out so that every worker
with a free place gets some: a slot's queue is split across its worker's free places
(unordered: across every free place of every worker, as they share one queue), least
loaded workers first. With a batch handler (``batch_size``) a batch holds whole handler
batches, and a queue shorter than one waits up to ``batch_wait`` seconds from when it
became non-empty before it is shipped anyway.

The :class:`Batcher`'s queue bookkeeping is guarded by the engine's lock; batches are cut
and replies measured only in the engine's reader thread.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Hashable, Sequence

from laneway.engines.lanes import lane_function
from laneway.engines.process.slot import Batch, Ship, Slot, WorkerProcess
from laneway.options import NullKeys, Ordering
from laneway.types import Message

MAX_BATCH = 512  # most messages per batch; fewer when queued work is split across workers
BATCH_SECONDS = 0.05  # target run time of one batch, so in-flight work drains quickly
PIPELINE = 2  # batches outstanding per worker


class Batcher:
    """Cuts the queues of a process engine's slots into batches for their workers (see
    the module docs), learning from the workers' replies how long a message runs."""

    __slots__ = (
        "_batch_size", "_batch_wait", "_filling", "_lane_of", "_next_id", "_per_message",
        "_ship", "_unordered",
    )  # fmt: skip

    def __init__(
        self,
        ordering: Ordering,
        batch_size: int | None,
        batch_wait: float,
        null_keys: NullKeys = NullKeys.PARTITION,
        ship: Ship | None = None,
    ) -> None:
        self._ship = ship
        self._unordered = ordering is Ordering.UNORDERED
        self._lane_of = lane_function(ordering, null_keys)
        self._batch_size = batch_size
        self._batch_wait = batch_wait
        self._filling: dict[int, float] = {}  # id(queue) -> when it last became non-empty
        self._per_message: float | None = None  # handler seconds per message (moving average)
        self._next_id = 0

    @property
    def holds_back(self) -> bool:
        """Whether a short queue may wait for more (a batch handler with ``batch_wait``)."""
        return self._batch_size is not None and bool(self._batch_wait)

    def add(self, queue: deque[Message], messages: list[Message], now: float) -> None:
        """Queue ``messages``, noting when ``queue`` stopped being empty."""
        if messages and not queue:
            self._filling[id(queue)] = now
        queue.extend(messages)

    def measure(self, seconds: float, ran: int) -> None:
        """Take in a reply: its batch ran ``ran`` messages in ``seconds`` of handler time."""
        if ran:
            per_message = seconds / ran
            last = self._per_message
            self._per_message = per_message if last is None else 0.7 * last + 0.3 * per_message

    def cut(self, slots: Sequence[Slot], now: float) -> list[tuple[WorkerProcess, Batch]]:
        """Batches for the workers with a free pipeline place, each already added to its
        slot's outstanding batches; the caller sends them."""
        plan: list[tuple[WorkerProcess, Batch]] = []
        ready = sorted((s for s in slots if _open(s)), key=_open, reverse=True)
        places = sum(_open(s) for s in ready)
        cap = self._cap()
        for _ in range(PIPELINE):
            for slot in ready:  # most open places (least loaded) first
                queue, free, worker = slot.queue, _open(slot), slot.worker
                if not queue or not free or worker is None or self._filling_up(queue, now):
                    continue
                share = places if self._unordered else free
                places -= 1
                size = min(cap, math.ceil(len(queue) / share))
                messages = self._take(queue, size, slot.held)
                if not messages:
                    continue
                batch = Batch(self._next_id, messages, self._ship)
                self._next_id += 1
                slot.outstanding.append(batch)
                plan.append((worker, batch))
        return plan

    def _take(self, queue: deque[Message], size: int, held: set[Hashable]) -> list[Message]:
        """Up to ``size`` messages from the front of ``queue``, leaving those of ``held``
        lanes (a detached worker still runs them) where they are."""
        if not held or self._lane_of is None:
            if size >= len(queue):
                whole = list(queue)
                queue.clear()
                return whole
            return [queue.popleft() for _ in range(size)]
        lane_of = self._lane_of
        messages: list[Message] = []
        kept: list[Message] = []
        while queue and len(messages) < size:
            message = queue.popleft()
            (kept if lane_of(message) in held else messages).append(message)
        queue.extendleft(reversed(kept))
        return messages

    def filled_in(self, slots: Sequence[Slot], now: float) -> list[float]:
        """Seconds until each queue that is filling up may be shipped anyway."""
        if not self.holds_back:
            return []
        due = [
            since + self._batch_wait - now
            for slot in slots
            if slot.queue and (since := self._filling.get(id(slot.queue))) is not None
        ]
        return [seconds for seconds in due if seconds > 0]

    def _cap(self) -> int:
        """Most messages per batch: what runs in about ``BATCH_SECONDS`` (1 until measured),
        and with a batch handler at least one handler batch (else whole handler batches)."""
        if self._per_message is None:
            cap = 1
        elif self._per_message <= BATCH_SECONDS / MAX_BATCH:
            cap = MAX_BATCH
        else:
            cap = max(1, int(BATCH_SECONDS / self._per_message))
        size = self._batch_size
        return cap if size is None else max(size, cap - cap % size)

    def _filling_up(self, queue: deque[Message], now: float) -> bool:
        """Whether a batch handler's queue should wait for more (``batch_wait``)."""
        size = self._batch_size
        if size is None or len(queue) >= size:
            return False
        return now < self._filling.get(id(queue), now) + self._batch_wait


def _open(slot: Slot) -> int:
    """Batches the slot's worker can take now (none while it is asked for what it has not
    started)."""
    if slot.worker is None or not slot.worker.ready or slot.asking:
        return 0
    return PIPELINE - len(slot.outstanding)
