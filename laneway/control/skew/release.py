"""Release: which dispatched message the engine gets next, when tenants share it or some
work is urgent (``fairness``, ``priority``).

Without either option every dispatched message goes to the engine at once
(:class:`DirectRelease`). With them, :class:`FairRelease` keeps dispatched messages in
their lanes and hands the engine a window of them (``concurrency`` and a quarter more, so
a worker that finishes finds the next message already there, but a message let in now
waits behind at most a quarter of ``concurrency`` others; at most ``LANE_AHEAD`` per
lane, so a hot key cannot fill the window with messages that could only run one after
another), choosing each next message:

1. among the groups (``Fairness.group_by``) with a releasable lane and room under their
   caps, by smooth weighted round robin (each group's turns in proportion to its weight,
   spread evenly, as nginx balances upstreams);
2. within the group, the lane whose next message waited ``STARVE_AFTER`` seconds or more,
   else the lane whose next message has the highest ``priority`` (ties: the oldest), else
   the oldest;
3. a lane's messages in offset order, always: order is never traded for priority.

A group's caps are ``max_in_flight`` (released and not finished) and ``max_rate``
(released per second). Failed attempts shrink them (AIMD): a message of the group that
fails for good (a handler raising :class:`~laneway.fairness.Overloaded` through its
retries, say) halves them, and each ``window`` messages of the group settled without
one grow them back by a step, up to what was configured.
"""

from __future__ import annotations

import heapq
import itertools
import time
from collections import deque
from collections.abc import Callable, Collection, Hashable
from dataclasses import dataclass, field

from laneway.config import ConsumerConfig
from laneway.engines.admission.rate import TokenBucket
from laneway.engines.base import Engine
from laneway.engines.lanes import LaneOf, lane_function
from laneway.fairness import Fairness
from laneway.logs import get_logger
from laneway.types import Message, PartitionId

log = get_logger(__name__)

AHEAD_SHARE = 4
"""The window is ``concurrency + concurrency // AHEAD_SHARE`` (at least
:data:`MIN_WINDOW`): enough to keep every worker busy between two turns of the control
loop, few enough that a new urgent message or a quiet tenant's is next in line."""
MIN_WINDOW = 16
LANE_AHEAD = 2
"""Messages of one lane released and not finished at most: one running, one ready."""
STARVE_AFTER = 5.0
"""Seconds a lane's next message may wait for its turn before it goes first, whatever
its priority: the starvation bound."""
GROW_EVERY = 32
"""Messages of a group settled without a failure per step its shrunk caps grow back."""

Priority = Callable[[Message], int]
_Position = tuple[str, int, int]


class DirectRelease:
    """Every dispatched message goes to the engine at once."""

    def __init__(self, engine: Engine) -> None:
        self._engine = engine

    @property
    def queued(self) -> int:
        return 0

    def submit(self, messages: list[Message]) -> None:
        self._engine.submit(messages)

    def settled(self, messages: list[Message], failed: list[Message]) -> None:
        pass

    def pump(self) -> None:
        pass

    def cancel(self, partitions: Collection[PartitionId]) -> list[Message]:
        return self._engine.cancel(partitions)


@dataclass
class _Group:
    """One group's releasable lanes and its share of the engine."""

    weight: float
    cap: int | None
    rate: float | None
    ready: list[tuple[int, float, int, Hashable]] = field(default_factory=list)
    """A heap of ``(-priority, since, seq, lane)``: lanes whose next message may go."""
    oldest: deque[tuple[float, int, Hashable]] = field(default_factory=deque)
    """The same lanes by when their next message became ready (for the starvation bound)."""
    in_flight: int = 0
    allowed: float = 0.0
    """The in-flight cap now (``cap`` shrunk by failures, growing back); 0: no cap."""
    bucket: TokenBucket | None = None
    current: float = 0.0
    calm: int = 0
    """Messages settled without a failure since the caps last changed."""

    def room(self, now: float) -> bool:
        if self.allowed and self.in_flight >= int(self.allowed):
            return False
        return self.bucket is None or self.bucket.due(now) <= 0.0


class FairRelease:
    """Releases dispatched messages to ``engine`` fairly (see the module docs).

    Control thread only: :meth:`submit` with dispatched messages, :meth:`settled` with
    those done with, :meth:`pump` once per loop turn (rate caps free up with time),
    :meth:`cancel` to take back what ``partitions`` have queued here and in the engine.
    Tuning: ``fairness`` (weights, caps), ``priority``, ``concurrency`` (the window).
    """

    def __init__(
        self,
        engine: Engine,
        lane_of: LaneOf,
        fairness: Fairness | None,
        priority: Priority | None,
        concurrency: int,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._engine = engine
        self._lane_of = lane_of
        self._fairness = fairness
        self._priority = priority
        self._window = max(MIN_WINDOW, concurrency + concurrency // AHEAD_SHARE)
        self._clock = clock
        self._lanes: dict[Hashable, deque[Message]] = {}
        self._ahead: dict[Hashable, int] = {}
        """Per lane, messages released and not finished."""
        self._ready_seq: dict[Hashable, int] = {}
        """Per lane in a group's ready heap, the entry that counts (older ones are stale)."""
        self._groups: dict[Hashable, _Group] = {}
        self._released: dict[_Position, Hashable] = {}
        """The group of each released message not finished."""
        self._seq = itertools.count()
        self.queued = 0
        """Messages dispatched and not released yet."""

    def submit(self, messages: list[Message]) -> None:
        lane_of = self._lane_of
        lanes = self._lanes
        now = self._clock()
        for message in messages:
            lane = lane_of(message)
            queue = lanes.get(lane)
            if queue is None:
                lanes[lane] = queue = deque()
            queue.append(message)
            if len(queue) == 1:
                self._make_ready(lane, now)
        self.queued += len(messages)
        self.pump()

    def settled(self, messages: list[Message], failed: list[Message]) -> None:
        """Messages done with (``failed``: those of them given up after failing)."""
        released, ahead, lane_of = self._released, self._ahead, self._lane_of
        now = self._clock()
        for message in messages:
            group_id = released.pop((message.topic, message.partition, message.offset), _NONE)
            if group_id is _NONE:
                continue
            group = self._groups[group_id]
            group.in_flight -= 1
            self._calmer(group)
            lane = lane_of(message)
            left = ahead.get(lane, 0) - 1
            if left > 0:
                ahead[lane] = left
            else:
                ahead.pop(lane, None)
            if left + 1 == LANE_AHEAD and self._lanes.get(lane):
                self._make_ready(lane, now)
        for message in failed:
            group_id = self._group_of(message)
            if group_id in self._groups:
                self._shrink(group_id, self._groups[group_id])
        self.pump()

    def pump(self) -> None:
        """Release what fits the window, group by group in turn."""
        room = self._window - len(self._released)
        if room <= 0 or not self.queued:
            return
        now = self._clock()
        out: list[Message] = []
        while room > 0:
            group_id = self._next_group(now)
            if group_id is _NONE:
                break
            message = self._take(group_id, now)
            if message is None:
                continue
            out.append(message)
            room -= 1
        if out:
            self.queued -= len(out)
            self._engine.submit(out)

    def cancel(self, partitions: Collection[PartitionId]) -> list[Message]:
        wanted = set(partitions)
        taken: list[Message] = []
        for lane, queue in list(self._lanes.items()):
            if queue and (queue[0].topic, queue[0].partition) in wanted:
                taken.extend(queue)
                del self._lanes[lane]
                self._ready_seq.pop(lane, None)
        self.queued -= len(taken)
        returned = self._engine.cancel(wanted)
        for message in returned:  # released, never started: no longer ahead in the engine
            group_id = self._released.pop((message.topic, message.partition, message.offset), _NONE)
            if group_id is not _NONE:
                self._groups[group_id].in_flight -= 1
                lane = self._lane_of(message)
                self._ahead[lane] = self._ahead.get(lane, 1) - 1
        return sorted(taken + returned, key=_position)

    # -- internals ----------------------------------------------------------------------

    def _group_of(self, message: Message) -> Hashable:
        fairness = self._fairness
        if fairness is None:
            return None
        try:
            return fairness.group_by(message)
        except Exception as error:
            log.warning("fairness.group_by raised %s: message in group None", type(error).__name__)
            return None

    def _group(self, group_id: Hashable) -> _Group:
        group = self._groups.get(group_id)
        if group is None:
            fairness = self._fairness
            cap = None if fairness is None else fairness.in_flight_cap(group_id)
            rate = None if fairness is None else fairness.rate_cap(group_id)
            weight = 1.0 if fairness is None else fairness.weight(group_id)
            group = _Group(weight, cap, rate, allowed=float(cap or 0))
            group.bucket = None if rate is None else TokenBucket(rate)
            self._groups[group_id] = group
        return group

    def _make_ready(self, lane: Hashable, now: float) -> None:
        """The lane's next message may be released: list the lane in its group."""
        if self._ahead.get(lane, 0) >= LANE_AHEAD:
            return
        head = self._lanes[lane][0]
        group = self._group(self._group_of(head))
        seq = next(self._seq)
        self._ready_seq[lane] = seq
        priority = self._priority(head) if self._priority is not None else 0
        heapq.heappush(group.ready, (-priority, now, seq, lane))
        group.oldest.append((now, seq, lane))

    def _next_group(self, now: float) -> Hashable:
        """The group whose turn it is (smooth weighted round robin over groups with a
        releasable lane and room), or ``_NONE``."""
        best: Hashable = _NONE
        best_group: _Group | None = None
        total = 0.0
        for group_id, group in self._groups.items():
            if not group.ready or not group.room(now):
                continue
            group.current += group.weight
            total += group.weight
            if best_group is None or group.current > best_group.current:
                best, best_group = group_id, group
        if best_group is None:
            return _NONE
        best_group.current -= total
        return best

    def _take(self, group_id: Hashable, now: float) -> Message | None:
        """Release the next message of the group's chosen lane (``None``: the entry it
        found was stale; the caller looks again)."""
        group = self._groups[group_id]
        lane = self._starving(group, now)
        if lane is None:
            _, _, seq, lane = heapq.heappop(group.ready)
            if self._ready_seq.get(lane) != seq:
                return None
        del self._ready_seq[lane]
        queue = self._lanes[lane]
        message = queue.popleft()
        if not queue:
            del self._lanes[lane]
        self._released[(message.topic, message.partition, message.offset)] = group_id
        group.in_flight += 1
        if group.bucket is not None:
            group.bucket.reserve(now)
        self._ahead[lane] = self._ahead.get(lane, 0) + 1
        if queue:
            self._make_ready(lane, now)
        return message

    def _starving(self, group: _Group, now: float) -> Hashable | None:
        """A lane of the group whose next message waited :data:`STARVE_AFTER` seconds."""
        oldest = group.oldest
        while oldest:
            since, seq, lane = oldest[0]
            if self._ready_seq.get(lane) != seq:
                oldest.popleft()  # released since, or listed again
                continue
            if now - since < STARVE_AFTER:
                return None
            oldest.popleft()
            return lane
        return None

    def _shrink(self, group_id: Hashable, group: _Group) -> None:
        """A failure: halve the group's caps (at least one message in flight, a message a
        second), and start counting calm settlements again."""
        if group.cap is not None:
            group.allowed = max(1.0, (group.allowed or float(group.cap)) / 2)
        if group.rate is not None and group.bucket is not None:
            group.bucket = TokenBucket(max(1.0, group.bucket.rate / 2))
        group.calm = 0
        log.info("group %r failed: its caps are halved for a while", group_id)

    def _calmer(self, group: _Group) -> None:
        """A message settled without failing: every :data:`GROW_EVERY`, the caps grow
        back a step (one in flight; a tenth of the configured rate)."""
        group.calm += 1
        if group.calm < GROW_EVERY:
            return
        group.calm = 0
        if group.cap is not None and group.allowed < group.cap:
            group.allowed = min(float(group.cap), group.allowed + 1)
        if group.rate is not None and group.bucket is not None and group.bucket.rate < group.rate:
            group.bucket = TokenBucket(min(group.rate, group.bucket.rate + group.rate / 10))


class _Missing:
    """A group id no group has (``None`` is a group: messages without one)."""


_NONE: Hashable = _Missing()


def _position(message: Message) -> _Position:
    return message.topic, message.partition, message.offset


def release_for(config: ConsumerConfig, engine: Engine) -> DirectRelease | FairRelease:
    """How a consumer with ``config`` hands dispatched messages to ``engine``."""
    if config.fairness is None and config.priority is None:
        return DirectRelease(engine)
    lane_of = lane_function(config.ordering, config.null_keys) or _own_lane
    return FairRelease(engine, lane_of, config.fairness, config.priority, config.concurrency)


def _own_lane(message: Message) -> Hashable:
    """Unordered: every message is a lane of its own."""
    return message.topic, message.partition, message.offset
