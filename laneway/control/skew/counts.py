"""LaneCounts: how many fetched messages of each lane (and of each group) are not finished.

Two counters per lane, both updated a batch at a time in C (``Counter.update`` over the
lanes of a batch): messages taken in and messages done; a lane's load is the difference.
They are what :class:`~laneway.control.skew.containment.Containment` caps and what the
hot keys (:meth:`LaneCounts.hottest`) are ranked by. Lanes with nothing left are dropped
now and then (:meth:`LaneCounts.compact`), so memory follows the keys in the buffer, not
every key ever seen. With ``group_of`` (``Fairness.group_by``) each group's load is kept
the same way, a message at a time (only consumers with fairness pay for it).
"""

from __future__ import annotations

import heapq
from collections import Counter
from collections.abc import Collection, Hashable, Iterable

from laneway.engines.lanes import LaneOf
from laneway.fairness import GroupOf
from laneway.types import Message, PartitionId

COMPACT_ABOVE = 100_000
"""Lanes tracked above which :meth:`LaneCounts.compact` drops the finished ones at once."""


class LaneCounts:
    """Messages of each lane (``lane_of``) taken in and not done. Control thread only.

    Tuning: none.
    """

    def __init__(self, lane_of: LaneOf, group_of: GroupOf | None = None) -> None:
        self.lane_of = lane_of
        self.group_of = group_of
        self._taken: Counter[Hashable] = Counter()
        self._done: Counter[Hashable] = Counter()
        self._groups: Counter[Hashable] = Counter()
        """Per group, messages taken in and not done (only with ``group_of``)."""

    def take(self, lanes: Iterable[Hashable], groups: Iterable[Hashable] = ()) -> None:
        """Messages of these lanes (one entry per message) were taken in, of these groups."""
        self._taken.update(lanes)
        self._groups.update(groups)

    def done(self, messages: list[Message]) -> None:
        """Messages taken in before are finished (or given up on, or given back)."""
        if messages:
            self._done.update(map(self.lane_of, messages))
            if self.group_of is not None:
                self._groups.subtract(map(self.group, messages))
            if len(self._done) > COMPACT_ABOVE:
                self.compact()

    def load(self, lane: Hashable) -> int:
        """The lane's messages taken in and not done."""
        return self._taken[lane] - self._done[lane]

    def group(self, message: Message) -> Hashable:
        """The message's group (``None`` when ``group_by`` raises, or without fairness)."""
        group_of = self.group_of
        if group_of is None:
            return None
        try:
            return group_of(message)
        except Exception:
            return None

    def group_load(self, group: Hashable) -> int:
        """The group's messages taken in and not done."""
        return self._groups[group]

    def compact(self) -> None:
        """Forget lanes with nothing left."""
        taken, done = self._taken, self._done
        for lane in [lane for lane, count in taken.items() if done[lane] >= count]:
            del taken[lane]
            done.pop(lane, None)
        for lane in [lane for lane in done if lane not in taken]:
            del done[lane]

    def forget(self, partitions: Collection[PartitionId]) -> None:
        """Partitions given up: their lanes' counts no longer mean anything."""
        wanted = set(partitions)
        for counter in (self._taken, self._done):
            for lane in [lane for lane in counter if _partition(lane) in wanted]:
                del counter[lane]

    def hottest(self, most: int) -> list[tuple[Hashable, int]]:
        """The ``most`` lanes with the most messages not done, most first (none empty)."""
        done = self._done
        loads = ((lane, count - done[lane]) for lane, count in self._taken.items())
        return [item for item in heapq.nlargest(most, loads, key=_second) if item[1] > 0]


def _second(item: tuple[Hashable, int]) -> int:
    return item[1]


def _partition(lane: Hashable) -> PartitionId:
    return lane[0], lane[1]  # type: ignore[index]
