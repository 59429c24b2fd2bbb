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

import time
from collections.abc import Callable, Collection, Hashable
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

REWIND_AGAIN_AFTER = 2.0
"""Seconds after which a rewind whose replay did not come (the partition was paused, or
the source refused) is made again."""
HOT_KEYS = 10
"""How many of the hottest keys ``stats().hot_keys`` lists."""
GROUP_SHARE = 2
"""With fairness, a group holds at most ``max_buffered / GROUP_SHARE`` messages."""
GROUP_ROUNDS = 16
"""... and at most this many times its ``max_in_flight``: more could not start soon."""


class Containment:
    """Caps each lane's buffered messages at ``cap`` (see the module docs).

    The control plane calls :meth:`admit` with every message it is about to dispatch (new
    and released alike) and :meth:`settled` with every message done with; it declines
    through ``progress`` and rewinds through ``source``. Control thread only. Tuning:
    ``max_buffered_per_key`` (``cap``).
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
        self._rewound: dict[PartitionId, tuple[int, float]] = {}
        """Partitions rewound, to which offset and when (until the replay comes)."""
        self.declined = 0
        """Messages declined so far (read again later)."""
        self.rewinds = 0
        """Partitions rewound so far."""

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
        for message, lane in zip(messages, lanes, strict=True):
            group = counts.group(message)
            full = counts.load(lane) >= cap or (
                group_cap is not None and counts.group_load(group) >= group_cap(group)
            )
            declined = declining.get(lane)
            if declined is not None:
                if message.offset == declined[0]:
                    self._rewound.pop((message.topic, message.partition), None)
                if message.offset != declined[0] or full:
                    out.append(message)
                    continue
                del declining[lane]
            elif full:
                declining[lane] = (message.offset, group)
                out.append(message)
                continue
            counts.take((lane,), (group,) if group_cap is not None else ())
            kept.append(message)
        if out:
            self.declined += len(out)
            self._progress.decline(out)
        return kept

    def settled(self, messages: list[Message]) -> None:
        """Messages done with: count them, and rewind each partition where a declining
        lane is down to half its cap."""
        self._counts.done(messages)
        if not self._declining:
            return
        counts, low = self._counts, self._low
        wanted: dict[PartitionId, int] = {}
        group_cap = self._group_cap
        for lane, (first, group) in self._declining.items():
            if counts.load(lane) > low:
                continue
            if group_cap is not None and counts.group_load(group) > group_cap(group) // 2:
                continue
            pid = lane[0], lane[1]  # type: ignore[index]
            wanted[pid] = min(first, wanted.get(pid, first))
        if wanted:
            self._rewind(wanted)

    def forget(self, partitions: Collection[PartitionId]) -> None:
        """Partitions given up: their lanes, declines and rewinds are forgotten."""
        wanted = set(partitions)
        self._counts.forget(wanted)
        for lane in [lane for lane in self._declining if (lane[0], lane[1]) in wanted]:  # type: ignore[index]
            del self._declining[lane]
        for pid in wanted:
            self._rewound.pop(pid, None)

    def hot_keys(self) -> tuple[HotKey, ...]:
        """The :data:`HOT_KEYS` lanes holding most of the buffer, hottest first."""
        declining = self._declining
        return tuple(
            HotKey(lane[0], lane[1], lane[2] if len(lane) > 2 else None, load, lane in declining)  # type: ignore[index,arg-type]
            for lane, load in self._counts.hottest(HOT_KEYS)
        )

    def _rewind(self, wanted: dict[PartitionId, int]) -> None:
        now = self._clock()
        due: dict[PartitionId, int] = {}
        for pid, offset in wanted.items():
            rewound = self._rewound.get(pid)
            if rewound is None or rewound[0] > offset or now - rewound[1] >= REWIND_AGAIN_AFTER:
                due[pid] = offset
        if not due:
            return
        try:
            self._source.rewind(due)
        except SourceError as error:
            log.warning("reading partitions %s again failed (tried again later): %s", due, error)
        for pid, offset in due.items():
            self._rewound[pid] = (offset, now)
        self.rewinds += len(due)


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

    def group_cap(group: Hashable) -> int:
        in_flight = fairness.in_flight_cap(group)
        return share if in_flight is None else min(share, GROUP_ROUNDS * in_flight)

    return Containment(per_key, counts, progress, rewinding, group_cap=group_cap)
