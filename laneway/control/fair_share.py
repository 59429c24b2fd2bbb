"""FairShare: keeps a few partitions from filling the consumer's buffer on their own."""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from typing import Protocol

from laneway.control.drain_rate import DrainRate
from laneway.offsets.progress import PartitionLoad
from laneway.types import PartitionId

STARVE_HORIZON = 0.05
"""Seconds of work in the buffer above which a starving partition is worth pausing others."""


class PartitionControl(Protocol):
    """The part of a :class:`~laneway.sources.base.Source` that :class:`FairShare` uses."""

    def pause(self, partitions: Iterable[PartitionId]) -> None: ...

    def resume(self, partitions: Iterable[PartitionId]) -> None: ...

    def unread(self, partitions: Iterable[PartitionId]) -> dict[PartitionId, int]: ...


class FairShare:
    """Pauses partitions that hold more than their share of ``max_buffered``.

    Kafka hands out a partition's backlog in large chunks, so without this the first polls
    would fill the buffer from two or three partitions and the keys of the others would
    idle. A partition's *share* is ``max_buffered`` / owned partitions; one poll asks for
    no more than that. Once half the buffer is in use, partitions holding their share or
    more are paused on their own, and resumed when they are under three quarters of it or
    seven eighths of the buffer is free.

    *Catching up* is the case this exists for: a partition has nothing buffered while the
    source knows of a backlog of it (a quarter share or more), and the engine needs more
    than ``STARVE_HORIZON`` seconds to finish what is buffered. Then polls ask for a
    quarter share, every partition holding that much is paused, and none is resumed until
    no partition starves: the first fill reaches all 8 partitions of the Kafka sleep
    benchmark in ~19 ms instead of ~28 ms. Pausing only when it pays matters because a
    Kafka pause drops the partition's prefetched messages: a consumer that keeps up (or
    one at the live end of the log) never pauses. Tuning is through ``max_buffered``.

    Runs on the control thread; ``paused_all`` tells it that the control plane has paused
    every partition for backpressure (then nothing is resumed here).
    """

    def __init__(self, source: PartitionControl, max_buffered: int) -> None:
        self._source = source
        self._max_buffered = max_buffered
        self.over_share: set[PartitionId] = set()
        self.drain = DrainRate()
        self.catching_up = False

    def share(self, owned: int) -> int:
        """A partition's fair share of ``max_buffered`` among ``owned`` partitions."""
        return max(1, self._max_buffered // max(1, owned))

    def balance(
        self, owned: Mapping[PartitionId, PartitionLoad], room: int, paused_all: bool
    ) -> None:
        """Pause or resume partitions by the rule above; ``room`` is ``max_buffered``
        minus the messages buffered now."""
        limit = self._max_buffered
        share = self.share(len(owned))
        quarter = max(1, share // 4)
        in_use = limit - room
        self.catching_up = (
            in_use >= limit // 16 and self._drains_slowly(in_use) and self._starving(owned, quarter)
        )
        if self.over_share and not self.catching_up:
            plenty = room >= limit * 7 // 8
            low = share * 3 // 4
            back = [
                p for p in self.over_share if plenty or p not in owned or owned[p].buffered <= low
            ]
            if back:
                self.over_share.difference_update(back)
                if not paused_all:
                    self._source.resume([p for p in back if p in owned])
        if self.catching_up:
            enough = quarter
        elif in_use >= limit // 2:
            enough = share
        else:
            return
        over = [
            pid
            for pid, partition in owned.items()
            if partition.buffered >= enough and pid not in self.over_share
        ]
        if over:
            self.over_share.update(over)
            if not paused_all:
                self._source.pause(over)

    def poll_limit(self, owned: int) -> int:
        """The most one poll should ask for: a share, or a quarter of one while catching up
        (so the partitions queued behind others are reached after few messages each)."""
        share = self.share(owned)
        return max(1, share // 4) if self.catching_up else share

    def resumable(self, partitions: Iterable[PartitionId]) -> list[PartitionId]:
        """Those of ``partitions`` this keeps paused no longer (for lifting backpressure)."""
        return [p for p in partitions if p not in self.over_share]

    def forget(self, partition: PartitionId) -> None:
        """``partition`` is no longer owned."""
        self.over_share.discard(partition)

    def _drains_slowly(self, in_use: int) -> bool:
        """True when the engine needs more than ``STARVE_HORIZON`` seconds to finish what is
        buffered (a fast consumer reaches a starving partition's messages on its own, and a
        pause would only cost the others a refetch)."""
        rate = self.drain.per_second(time.monotonic())
        return rate is not None and in_use > rate * STARVE_HORIZON

    def _starving(self, owned: Mapping[PartitionId, PartitionLoad], backlog: int) -> bool:
        """True when a partition has nothing buffered although the source has at least
        ``backlog`` more of it: its messages are queued behind other partitions' (Kafka
        hands out a partition's backlog in one chunk), so its keys idle until those are
        consumed. (A few unread messages are just on their way, not a backlog; and a
        partition paused here is not starving, it is waiting for its resume.)"""
        empty = [
            pid
            for pid, partition in owned.items()
            if not partition.buffered and pid not in self.over_share  # not paused by us
        ]
        return bool(empty) and max(self._source.unread(empty).values(), default=0) >= backlog
