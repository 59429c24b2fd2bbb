"""Containment: a hot key's backlog cannot fill the buffer the other keys need.

Under key order a hot key runs one message at a time, so in a backlog (a consumer
catching up, a burst) its messages pile up. Left alone they fill ``max_buffered``, the
source is paused, and every other key — on every partition — waits for a key it does not
share. So each key may hold at most ``max_buffered_per_key`` fetched-but-unfinished
messages. Past that its later messages are *declined*: not dispatched, not kept in
memory, their offsets left unfinished (the commit point cannot pass them, nothing is
lost). Once the key is down to half its cap, the partition is *rewound* to its first
declined offset and read again: what was dispatched or finished since is skipped (the
offset tracker knows it), the declined messages come back and are admitted in offset
order.

Order: once a key declines a message, it declines every later one until that message
comes back, so a key never runs a later message before an earlier one. The price is
reading the rest of the partition again from that offset, at most once per half a cap of
the hot key's messages.
"""

from __future__ import annotations

import heapq
import time
from collections import Counter
from collections.abc import Callable, Collection, Hashable, Mapping
from dataclasses import dataclass, field
from operator import itemgetter
from typing import cast

from laneway.config import ConsumerConfig
from laneway.control.skew.counts import LaneCounts
from laneway.engines.lanes import lane_function
from laneway.errors import SourceError
from laneway.logs import get_logger
from laneway.offsets.progress import Progress
from laneway.options import EngineKind, Ordering
from laneway.sources.base import RewindingSource, Source, SourceCapabilities
from laneway.types import HotKey, Message, PartitionId

log = get_logger(__name__)

REWIND_AGAIN_AFTER = 0.5
"""Seconds after which a partition's reading again may start over (one that did not come:
the partition was paused, or the source refused)."""
HOT_KEYS = 10
"""How many of the hottest keys ``stats().hot_keys`` lists."""
LOOK_EVERY = 0.002
"""Seconds between two looks for partitions to read again (each look reads every
declining lane's load)."""
GROUP_SHARE = 2
"""With fairness, a group holds at most ``max_buffered / GROUP_SHARE`` messages."""
GROUP_ROUNDS = 16
"""... and at most this many times its ``max_in_flight``: more could not start soon."""


@dataclass
class _Replay:
    """A partition read again: from where, up to which offset (the fetch head then), since
    when, and the lanes it was read again for (while one of them still has room it goes
    on; once all are full again the rest of it is skipped)."""

    start: int
    head: int
    since: float
    refilling: dict[Hashable, Hashable]
    """The lanes it is for, with their groups: a lane is done once it declines again, and
    every lane of a group once the group is full again."""
    served: set[Hashable] = field(default_factory=set)
    """Lanes it admitted messages for: one of them down to half its cap again needs the
    next reading, whether this one is over or not."""


class Containment:
    """Caps each lane's buffered messages at ``cap`` (see the module docs).

    The control plane calls :meth:`admit` with every message it is about to dispatch (new
    and released alike) and :meth:`settled` with every message done with; it declines
    through ``progress`` and reads partitions again through ``source``. Control thread
    only. Tuning: ``max_buffered_per_key`` (``cap``).

    A partition is read again from its lowest declined offset for the declining lanes down
    to half their cap; as soon as each of them is full again the rest of that reading is
    skipped (the fetch position moves on to where it was), so each reading costs about
    what it admits, not the whole span of a hot key's backlog again.
    """

    def __init__(
        self,
        cap: int,
        counts: LaneCounts,
        progress: Progress,
        source: RewindingSource,
        clock: Callable[[], float] = time.monotonic,
        group_cap: Callable[[Hashable], int] | None = None,
    ) -> None:
        self._cap = cap
        self._low = max(1, cap // 2)
        self._group_cap = group_cap
        self._counts = counts
        self._progress = progress
        self._source = source
        self._clock = clock
        self._declining: dict[Hashable, tuple[int, Hashable]] = {}
        """Per lane declining, its first declined offset (its later messages are declined
        until that one comes back) and that message's group."""
        self._by_group: dict[Hashable, set[Hashable]] = {}
        """The declining lanes of each group."""
        self._per_partition: Counter[PartitionId] = Counter()
        """How many lanes of each partition decline."""
        self._replays: dict[PartitionId, _Replay] = {}
        self._pending = False
        """Whether some partition holds declined messages (readings are due until none)."""
        self._next_look = 0.0
        self.declined = 0
        """Messages declined so far (read again later)."""
        self.rewinds = 0
        """Partitions read again so far."""

    def admit(self, messages: list[Message], buffered: int) -> list[Message]:
        """The messages of ``messages`` to dispatch; the others are declined. ``buffered``:
        the consumer's buffered messages, these included (below the cap no lane can be
        over it, and nothing is looked at per message)."""
        counts = self._counts
        lanes = list(map(counts.lane_of, messages))
        declining = self._declining
        group_cap = self._group_cap
        if not declining and buffered <= self._cap and group_cap is None:
            counts.take(lanes)
            return messages
        kept: list[Message] = []
        out: list[Message] = []
        cap = self._cap
        replays = self._replays
        for message, lane in zip(messages, lanes, strict=True):
            group = counts.group(message)
            group_full = group_cap is not None and counts.group_load(group) >= group_cap(group)
            full = group_full or counts.load(lane) >= cap
            declined = declining.get(lane)
            if declined is not None:
                if message.offset != declined[0] or full:
                    out.append(message)
                    if replays:
                        self._full_again(message, lane, group if group_full else _NO_GROUP)
                    continue
                self._stop_declining(lane)
            elif full:
                self._start_declining(lane, message.offset, group)
                out.append(message)
                if replays:
                    self._full_again(message, lane, group if group_full else _NO_GROUP)
                continue
            counts.take((lane,), (group,) if group_cap is not None else ())
            kept.append(message)
            if replays and declined is not None:
                self._served(message, lane)
        if out:
            self.declined += len(out)
            self._progress.decline(out)
            self._pending = True
        return kept

    def settled(self, messages: list[Message]) -> None:
        """Messages done with: count them, and read again each partition holding declined
        messages where a declining lane is down to half its cap, or where no lane declines
        any more (its lanes took their first declined messages back, and the rest must be
        read again too); not while it is being read again already."""
        self._counts.done(messages)
        if not self._declining and not self._pending:
            return
        now = self._clock()
        if now < self._next_look:
            return
        self._next_look = now + LOOK_EVERY
        counts, low = self._counts, self._low
        group_cap = self._group_cap
        declining = self._per_partition
        room: dict[PartitionId, dict[Hashable, Hashable]] = {}
        for group, lanes in self._by_group.items():
            if group_cap is not None and counts.group_load(group) > group_cap(group) // 2:
                continue  # the group's lanes wait for the group
            for lane in lanes:
                if counts.load(lane) <= low:
                    room.setdefault((lane[0], lane[1]), {})[lane] = group  # type: ignore[index]
        pending = self._progress.declined()
        self._pending = bool(pending)
        self._forget_deleted(pending)
        wanted: dict[PartitionId, _Replay] = {}
        for pid, (first, head) in pending.items():
            replay = self._replays.get(pid)
            if (
                replay is not None
                and now - replay.since < REWIND_AGAIN_AFTER
                and not replay.served.intersection(room.get(pid, ()))
            ):
                continue  # being read again (a stuck reading is made again after a while)
            if pid in room or pid not in declining:
                wanted[pid] = _Replay(first, head, now, room.get(pid, {}))
        if wanted:
            self._rewind(wanted)

    def forget(self, partitions: Collection[PartitionId]) -> None:
        """Partitions given up: their lanes, declines and readings are forgotten."""
        wanted = set(partitions)
        self._counts.forget(wanted)
        for lane in [lane for lane in self._declining if (lane[0], lane[1]) in wanted]:  # type: ignore[index]
            self._stop_declining(lane)
        for pid in wanted:
            self._replays.pop(pid, None)

    def hot_keys(self) -> tuple[HotKey, ...]:
        """The :data:`HOT_KEYS` hottest lanes: those holding messages off first (their
        backlog waits in the log, however little of it is buffered at the moment), then
        those holding most of the buffer; within each, most buffered first."""
        counts, declining = self._counts, self._declining
        held = heapq.nlargest(
            HOT_KEYS, ((lane, counts.load(lane)) for lane in declining), key=itemgetter(1)
        )
        others = [item for item in counts.hottest(HOT_KEYS + len(held)) if item[0] not in declining]
        return tuple(
            HotKey(lane[0], lane[1], lane[2] if len(lane) > 2 else None, load, lane in declining)  # type: ignore[index,arg-type]
            for lane, load in (held + others)[:HOT_KEYS]
        )

    def _start_declining(self, lane: Hashable, offset: int, group: Hashable) -> None:
        self._declining[lane] = (offset, group)
        self._by_group.setdefault(group, set()).add(lane)
        self._per_partition[lane[0], lane[1]] += 1  # type: ignore[index]

    def _forget_deleted(self, pending: Mapping[PartitionId, tuple[int, int]]) -> None:
        """Stop declining lanes whose first declined offset is no longer declined and never
        came back: the log deleted it (retention, DeleteRecords) and the progress forgot it.
        A lane whose first declined message is read again stops declining at once in
        :meth:`admit`, so at this point (between polls) only a deletion leaves one
        behind; kept declining, the lane would decline all its messages for good."""
        for lane, (first, _) in list(self._declining.items()):
            pid = lane[0], lane[1]  # type: ignore[index]
            lowest = pending.get(pid)
            if lowest is None or first < lowest[0]:
                self._stop_declining(lane)

    def _stop_declining(self, lane: Hashable) -> None:
        _, group = self._declining.pop(lane)
        lanes = self._by_group[group]
        lanes.discard(lane)
        if not lanes:
            del self._by_group[group]
        pid = lane[0], lane[1]  # type: ignore[index]
        self._per_partition[pid] -= 1
        if not self._per_partition[pid]:
            del self._per_partition[pid]

    def _served(self, message: Message, lane: Hashable) -> None:
        """A declining lane took its first declined message back during a reading."""
        replay = self._replays.get((message.topic, message.partition))
        if replay is not None:
            replay.served.add(lane)

    def _full_again(self, message: Message, lane: Hashable, full_group: Hashable) -> None:
        """A lane declined again during a reading of its partition (``full_group``: because
        its group is full); once every lane the reading was for is full again, the rest of
        the reading is skipped."""
        pid = message.topic, message.partition
        replay = self._replays.get(pid)
        if replay is None:
            return
        refilling = replay.refilling
        if full_group is not _NO_GROUP:
            for done in [each for each, group in refilling.items() if group == full_group]:
                del refilling[done]
        else:
            refilling.pop(lane, None)
        if refilling:
            return
        del self._replays[pid]
        if message.offset < replay.head:
            self._seek({pid: replay.head}, "skipping the rest of a reading")

    def _rewind(self, wanted: dict[PartitionId, _Replay]) -> None:
        if self._seek({pid: replay.start for pid, replay in wanted.items()}, "reading again"):
            self._replays.update(wanted)
            self.rewinds += len(wanted)

    def _seek(self, positions: dict[PartitionId, int], what: str) -> bool:
        try:
            self._source.rewind(positions)
        except SourceError as error:
            log.warning("%s partitions %s failed (tried again later): %s", what, positions, error)
            return False
        return True


_NO_GROUP: Hashable = object()
"""A declined message whose group is not full (its lane is)."""


class Uncontained:
    """No cap: the sync engine (it holds nothing back), an order that is not by key, or a
    source that cannot read a partition again. Counts nothing."""

    declined = 0
    rewinds = 0

    def admit(self, messages: list[Message], buffered: int) -> list[Message]:
        return messages

    def settled(self, messages: list[Message]) -> None:
        pass

    def forget(self, partitions: Collection[PartitionId]) -> None:
        pass

    def hot_keys(self) -> tuple[HotKey, ...]:
        return ()


def containment_for(
    config: ConsumerConfig, source: Source, capabilities: SourceCapabilities, progress: Progress
) -> Containment | Uncontained:
    """The containment a consumer with ``config`` on ``source`` runs with."""
    lane_of = lane_function(config.ordering, config.null_keys)
    per_key = config.max_buffered_per_key
    if (
        config.engine is EngineKind.SYNC
        or config.ordering is not Ordering.KEY
        or lane_of is None
        or per_key is None
        or not capabilities.rewinds
    ):
        return Uncontained()
    fairness = config.fairness
    counts = LaneCounts(lane_of, None if fairness is None else fairness.group_by)
    rewinding = cast(RewindingSource, source)
    if fairness is None:
        return Containment(per_key, counts, progress, rewinding)
    share = config.max_buffered // GROUP_SHARE
    caps: dict[Hashable, int] = {}

    def group_cap(group: Hashable) -> int:
        cap = caps.get(group)
        if cap is None:
            in_flight = fairness.in_flight_cap(group)
            cap = caps[group] = share if in_flight is None else min(share, GROUP_ROUNDS * in_flight)
        return cap

    return Containment(per_key, counts, progress, rewinding, group_cap=group_cap)
