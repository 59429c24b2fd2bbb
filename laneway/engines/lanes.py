"""Lanes: the unit of ordering.

A *lane* is the set of messages that must run one at a time, in offset order:

* ``ordering="key"``: one lane per ``(topic, partition, key)``. Messages whose key is
  ``None`` share one lane per partition (they are ordered like the partition itself), or
  with ``null_keys="unordered"`` each is a lane of its own.
* ``ordering="partition"``: one lane per ``(topic, partition)``.
* ``ordering="unordered"``: no lanes; every message may run at any time.

:class:`LaneScheduler` queues messages by lane and hands out *runs*: up to
``max_run`` consecutive messages of one lane, claimed by one worker which runs them in
order and then releases the lane. For batch handlers it hands out *batches* instead
(:meth:`LaneScheduler.claim_batch`): the heads of many ready lanes at once, each lane's
part in offset order, every lane in it busy until the batch is done. Claiming a run
instead of a single message is what keeps the per-message cost low; a lane being claimed
is what keeps its order.

The scheduler is not thread-safe: the thread engine guards it with a lock, the async
engine uses it from its event loop only.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Collection, Hashable, Iterable
from operator import attrgetter

from laneway.options import NullKeys, Ordering
from laneway.types import Message, PartitionId

LaneOf = Callable[[Message], Hashable]

UNORDERED_LANE = "unordered"
"""The lane id of every unordered run (releasing it is a no-op)."""


by_key: Callable[[Message], Hashable] = attrgetter("topic", "partition", "key")
"""The lane of a message under ``ordering="key"`` (a C call: this runs per message)."""
by_partition: Callable[[Message], Hashable] = attrgetter("topic", "partition")
"""The lane of a message under ``ordering="partition"``."""


def by_key_keyless_apart(message: Message) -> Hashable:
    """The lane of a message under ``ordering="key"`` with ``null_keys="unordered"``: a
    keyless message is a lane of its own."""
    if message.key is None:
        return message.topic, message.partition, None, message.offset
    return message.topic, message.partition, message.key


def lane_function(ordering: Ordering, null_keys: NullKeys = NullKeys.PARTITION) -> LaneOf | None:
    """The function mapping a message to its lane id, or ``None`` for unordered."""
    if ordering is Ordering.KEY:
        return by_key if null_keys is NullKeys.PARTITION else by_key_keyless_apart
    if ordering is Ordering.PARTITION:
        return by_partition
    return None


class LaneScheduler:
    """Queues messages per lane and hands out runs of one lane at a time.

    Tuning: ``max_run`` bounds how many messages one claim takes. Larger runs mean
    fewer lock round trips (throughput for tiny handlers); in unordered mode they also
    mean one worker may sit on messages another idle worker could have run, so the
    unordered run size is capped at a fair share of what is queued.
    """

    def __init__(
        self,
        ordering: Ordering,
        workers: int,
        max_run: int = 256,
        null_keys: NullKeys = NullKeys.PARTITION,
    ) -> None:
        self._lane_of = lane_function(ordering, null_keys)
        self._workers = max(1, workers)
        self._max_run = max_run
        self._lanes: dict[Hashable, deque[Message]] = {}
        self._ready: deque[Hashable] = deque()
        self._busy: set[Hashable] = set()
        self._unordered: deque[Message] = deque()
        self.queued = 0

    @property
    def ordered(self) -> bool:
        """True when messages are grouped in lanes (every mode but unordered)."""
        return self._lane_of is not None

    def add(self, messages: list[Message]) -> None:
        """Queue messages (in offset order per partition)."""
        self.queued += len(messages)
        lane_of = self._lane_of
        if lane_of is None:
            self._unordered.extend(messages)
            return
        lanes = self._lanes
        ready = self._ready
        for m in messages:
            lane = lane_of(m)
            queue = lanes.get(lane)
            if queue is None:
                lanes[lane] = queue = deque()
                ready.append(lane)
            queue.append(m)

    def has_ready(self) -> bool:
        return bool(self._ready) or bool(self._unordered)

    def ready_lanes(self) -> int:
        """How many claims could be served now (an upper bound for waking workers)."""
        if self._lane_of is None:
            return len(self._unordered)
        return len(self._ready)

    def claim(self) -> tuple[Hashable, list[Message]] | None:
        """Claim the next ready lane's run, or ``None`` if nothing can run now."""
        if self._lane_of is None:
            queue = self._unordered
            if not queue:
                return None
            size = min(self._max_run, max(1, len(queue) // self._workers))
            run = [queue.popleft() for _ in range(size)]
            self.queued -= size
            return UNORDERED_LANE, run
        if not self._ready:
            return None
        lane = self._ready.popleft()
        queue = self._lanes[lane]
        if len(queue) <= self._max_run:
            run = list(queue)
            queue.clear()
        else:
            run = [queue.popleft() for _ in range(self._max_run)]
        self._busy.add(lane)
        self.queued -= len(run)
        return lane, run

    def claim_lanes(self, most: int) -> list[tuple[Hashable, list[Message]]]:
        """Claim the runs of ready lanes, one lane after another, until they hold ``most``
        messages or no lane is ready (the first lane's run is taken whole, up to
        ``max_run``); empty if nothing can run now. Unordered: one run, as :meth:`claim`."""
        first = self.claim()
        if first is None:
            return []
        claimed = [first]
        if self._lane_of is None:
            return claimed
        taken = len(first[1])
        while taken < most:
            more = self.claim()
            if more is None:
                break
            claimed.append(more)
            taken += len(more[1])
        return claimed

    def ready_messages(self, enough: int) -> int:
        """Messages a claim could take now, counted up to ``enough`` (a batch's size)."""
        if self._lane_of is None:
            return min(len(self._unordered), enough)
        count = 0
        lanes = self._lanes
        for lane in self._ready:
            count += len(lanes[lane])
            if count >= enough:
                break
        return count

    def claim_batch(self, size: int) -> tuple[list[Hashable], list[Message]] | None:
        """Claim up to ``size`` messages for one batch handler call, from as many ready
        lanes as it takes (each lane's messages consecutive and in offset order); every
        lane taken is busy until :meth:`release_all`. ``None`` if nothing can run now."""
        if self._lane_of is None:
            queue = self._unordered
            if not queue:
                return None
            take = min(size, len(queue))
            self.queued -= take
            return [UNORDERED_LANE], [queue.popleft() for _ in range(take)]
        if not self._ready:
            return None
        lanes: list[Hashable] = []
        batch: list[Message] = []
        ready, busy = self._ready, self._busy
        while ready and len(batch) < size:
            lane = ready.popleft()
            queue = self._lanes[lane]
            room = size - len(batch)
            if len(queue) <= room:
                batch.extend(queue)
                queue.clear()
            else:
                batch.extend(queue.popleft() for _ in range(room))
            busy.add(lane)
            lanes.append(lane)
        self.queued -= len(batch)
        return lanes, batch

    def queued_in(self, lane: Hashable) -> list[Message]:
        """The messages queued in ``lane`` (ordered modes; a copy)."""
        queue = self._lanes.get(lane)
        return [] if queue is None else list(queue)

    def lane(self, message: Message) -> Hashable:
        """The lane of ``message`` (ordered modes; :data:`UNORDERED_LANE` otherwise)."""
        lane_of = self._lane_of
        return UNORDERED_LANE if lane_of is None else lane_of(message)

    def put_back(self, messages: list[Message]) -> None:
        """Return unstarted messages of claimed lanes to the front of their lanes, ahead of
        anything queued since, each lane's in offset order (ordered modes only). Their
        lanes stay busy until released."""
        lane_of = self._lane_of
        assert lane_of is not None, "unordered runs go back with add()"
        self.queued += len(messages)
        by_lane: dict[Hashable, list[Message]] = {}
        for message in messages:
            by_lane.setdefault(lane_of(message), []).append(message)
        lanes = self._lanes
        for lane, returned in by_lane.items():
            queue = lanes.get(lane)
            if queue is None:
                lanes[lane] = queue = deque()
            queue.extendleft(reversed(returned))

    def release_all(self, lanes: list[Hashable]) -> None:
        """The batch claimed for ``lanes`` is done."""
        for lane in lanes:
            self.release(lane)

    def release(self, lane: Hashable) -> None:
        """The run claimed for ``lane`` is done; the lane may run again."""
        if self._lane_of is None:
            return
        self._busy.discard(lane)
        queue = self._lanes.get(lane)
        if queue is None:
            return
        if queue:
            self._ready.append(lane)
        else:
            del self._lanes[lane]

    def cancel(self, partitions: Collection[PartitionId]) -> list[Message]:
        """Remove and return queued (unclaimed) messages of ``partitions``."""
        wanted = set(partitions)
        dropped: list[Message] = []
        if self._lane_of is None:
            kept: deque[Message] = deque()
            for m in self._unordered:
                (dropped if (m.topic, m.partition) in wanted else kept).append(m)
            self._unordered = kept
        else:
            for lane, queue in list(self._lanes.items()):
                if not queue or (queue[0].topic, queue[0].partition) not in wanted:
                    continue
                dropped.extend(queue)
                queue.clear()
                if lane not in self._busy:
                    del self._lanes[lane]
            self._ready = deque(lane for lane in self._ready if lane in self._lanes)
        self.queued -= len(dropped)
        return dropped


def steal(
    run: deque[Message], partitions: Collection[PartitionId], scheduler: LaneScheduler
) -> list[Message]:
    """Take the unstarted messages of ``partitions`` out of a run a worker is consuming.

    Workers consume runs with ``popleft`` (atomic), so popping the tail from another
    thread hands each message to exactly one side. A lane's run holds one partition, so
    it is stolen whole or not at all; an unordered run may mix partitions, and what is
    not wanted goes back to the scheduler (order does not matter there).
    """
    if not run:
        return []
    try:
        head = run[0]
    except IndexError:
        return []
    if scheduler.ordered and (head.topic, head.partition) not in partitions:
        return []
    stolen = unstarted(run)
    if scheduler.ordered:
        return stolen
    wanted = [m for m in stolen if (m.topic, m.partition) in partitions]
    scheduler.add([m for m in stolen if (m.topic, m.partition) not in partitions])
    return wanted


def unstarted(run: deque[Message]) -> list[Message]:
    """Empty ``run`` from the right while its worker pops from the left (both atomic), and
    return what this side took, in order: each message goes to exactly one side, and what
    the worker took is a prefix of the run, this side's the rest."""
    taken: list[Message] = []
    while True:
        try:
            taken.append(run.pop())
        except IndexError:
            break
    taken.reverse()
    return taken


def steal_half(runs: Iterable[deque[Message]]) -> list[Message]:
    """Unordered mode only: take half (rounded up) of the unstarted tail of the longest run.

    A worker that finds nothing queued calls this before going idle, so one slow message
    never holds the rest of its run while other workers wait. The owner pops from the
    left and the thief from the right; both are atomic, so no message runs twice.
    """
    longest = max(runs, key=len, default=None)
    if not longest:
        return []
    stolen: list[Message] = []
    for _ in range((len(longest) + 1) // 2):
        try:
            stolen.append(longest.pop())
        except IndexError:
            break
    stolen.reverse()
    return stolen
