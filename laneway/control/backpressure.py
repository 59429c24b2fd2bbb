"""Backpressure: how much the control loop may fetch, and when partitions are paused."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import NamedTuple, cast

from laneway.control.fair_share import FairShare, PartitionControl
from laneway.offsets.progress import PartitionLoad, Progress
from laneway.sources.base import PrefetchingSource, SourceCapabilities
from laneway.sources.capabilities import PARTITIONED_LOG
from laneway.types import PartitionId

IDLE_POLL_TIMEOUT = 0.1
"""Seconds one poll may wait when nothing is in flight (bounds how late stop() is seen)."""
BUSY_POLL_TIMEOUT = 0.02
"""Seconds one poll may wait while handlers are running. A poll returns at once when
messages arrive, so this only sets how often finished work is collected when nothing new
comes (e.g. the whole backlog is fetched): every 20 ms rather than every 5 ms cut the
control thread's GIL wake-ups fourfold and made 5 ms blocking handlers on 100 threads run
~5% faster (they wait less for the GIL after each sleep)."""
PAUSE_AFTER = 0.25
"""Seconds ``max_buffered`` must stay reached before the source's partitions are paused."""
PREFETCH_SHARE = 4
"""A prefetching source may hold ``max_buffered_bytes // PREFETCH_SHARE`` bytes of its own."""


class Turn(NamedTuple):
    """What one turn of the control loop does after collecting completions: wait up to
    ``wait`` seconds for ``at_least`` completions (0: don't wait), then poll for up to
    ``poll`` messages (0: don't poll), waiting up to ``poll_timeout`` for the first one."""

    wait: float
    at_least: int
    poll: int
    poll_timeout: float


class Backpressure:
    """Keeps fetched-but-unfinished messages under ``max_buffered`` and their bytes under
    ``max_buffered_bytes``, fairly across partitions.

    Once fewer than a sixteenth of the buffer (at most ``poll_batch_size``) is free,
    nothing more is fetched: refilling message by message as each one finishes woke the
    control thread (and took the GIL from handler threads) hundreds of times a second for
    one- or two-message polls. If the buffer stays that full for ``PAUSE_AFTER`` seconds,
    every owned partition is paused (the source keeps being polled, so a Kafka group
    session stays alive and rebalances are served) until the count falls to half of
    ``max_buffered``. Pausing only after a while matters: a Kafka pause drops the client's
    prefetched data, so fast handlers that free room within moments would pay a refetch
    for nothing. One poll asks for no more than a partition's fair share of the buffer,
    and :class:`~laneway.control.fair_share.FairShare` pauses partitions that hold more
    than that while the buffer fills, so the keys of every partition get work. Messages
    whose handler is done and that wait only for their results to be acknowledged (a round
    of writes takes a few milliseconds) hold buffer room but are nobody's share of handler
    work: FairShare leaves them out (counted in, they paused partitions dozens of times a
    run of fast handlers, each pause dropping the client's prefetch), and the drain rate
    counts a message when its handler is done.

    Bytes count like messages: the room left under ``max_buffered_bytes`` (see
    :class:`~laneway.offsets.progress.ProgressCounts`) is turned into messages by the
    largest message seen so far, so a poll never asks for more than fits (before
    anything was fetched one message is asked for; only messages larger than any before
    can overshoot, by at most one poll). When nothing is buffered one message is always
    allowed, however large, so the consumer never stalls. A source that prefetches on
    its own (``prefetches`` in its
    :class:`~laneway.sources.capabilities.SourceCapabilities`, e.g. Kafka) is told its
    share: ``max_buffered_bytes //`` :data:`PREFETCH_SHARE`, so the whole process stays
    bounded.

    A source that cannot pause (a Kafka share group, whose partitions are shared by every
    member) is simply not polled while the buffer is full, nor while its
    :class:`~laneway.offsets.progress.Progress` is :meth:`awaiting` acknowledgements
    before the next fetch; no partition is paused and nothing is balanced per partition.
    Such a source must keep its group membership without being polled for that long (see
    :class:`~laneway.sources.share.source.KafkaShareSource`).

    Tuning is through ``max_buffered``, ``max_buffered_bytes`` and ``poll_batch_size``.
    """

    def __init__(
        self,
        source: PartitionControl,
        max_buffered: int,
        poll_batch_size: int,
        max_buffered_bytes: int,
        capabilities: SourceCapabilities = PARTITIONED_LOG,
    ) -> None:
        self._source = source
        self._pauses = capabilities.pauses
        self._max_buffered = max_buffered
        self._max_bytes = max_buffered_bytes
        self._poll_batch_size = poll_batch_size
        self._low_water = max_buffered // 2
        self._worth_a_poll = max(1, min(poll_batch_size, max_buffered // 16))
        if capabilities.prefetches:
            prefetching = cast(PrefetchingSource, source)
            prefetching.bound_prefetch(max_buffered_bytes // PREFETCH_SHARE)
        self._fair = FairShare(source, max_buffered)
        self._full_since: float | None = None
        self._weighed = False
        self.paused = False
        """Whether every owned partition is paused because the buffer stayed full."""

    def next_turn(self, progress: Progress, now: float, writing: int = 0) -> Turn:
        """Decide the rest of this loop turn from what is buffered now; ``writing`` of the
        buffered messages wait only for their results to be acknowledged (a batch
        handler's group of messages may count once: the rest then count as work)."""
        awaiting = progress.awaiting(now)
        if awaiting:
            # Until the source may be polled again: wait for the messages it waits for
            # (at most BUSY_POLL_TIMEOUT, so timed work and stop() are seen).
            return Turn(BUSY_POLL_TIMEOUT, awaiting, 0, 0.0)
        counts = progress.counts
        buffered = counts.buffered
        room = self._max_buffered - buffered
        worth = self._worth_a_poll
        largest = counts.largest_message
        if largest:
            room = min(room, (self._max_bytes - counts.buffered_bytes) // largest)
            worth = max(1, min(worth, self._max_bytes // 16 // largest))
        if not buffered:
            room = max(room, 1)  # one message always, however large: never stall
        if not self._pauses:
            return self._turn_without_pausing(buffered, room, worth)
        owned = progress.partitions
        # Messages waiting only for their results' acknowledgement hold room but need no
        # handler: they are no partition's share of the work.
        self._fair.balance(owned, room + writing, self.paused)
        if self.paused and (
            buffered <= self._low_water and counts.buffered_bytes <= self._max_bytes // 2
        ):
            self._set_paused(False, owned)
        elif not self.paused and room < worth:
            if self._full_since is None:
                self._full_since = now
            if now - self._full_since < PAUSE_AFTER:
                return Turn(BUSY_POLL_TIMEOUT, worth - max(0, room), 0, 0.0)
            self._set_paused(True, owned)
        self._full_since = None
        if self.paused:
            return Turn(IDLE_POLL_TIMEOUT, 1, max(room, 1), 0.0)
        most = min(room, self._poll_batch_size, self._fair.poll_limit(len(owned)))
        if not self._weighed:
            most = 1  # nothing fetched yet: one message tells what messages weigh
        return Turn(0.0, 0, most, BUSY_POLL_TIMEOUT if buffered else IDLE_POLL_TIMEOUT)

    def _turn_without_pausing(self, buffered: int, room: int, worth: int) -> Turn:
        """Poll while the buffer has room for a worthwhile batch, else wait for room."""
        if room < worth:
            return Turn(BUSY_POLL_TIMEOUT, worth - max(0, room), 0, 0.0)
        most = min(room, self._poll_batch_size)
        return Turn(0.0, 0, most, BUSY_POLL_TIMEOUT if buffered else IDLE_POLL_TIMEOUT)

    def arrived(self, now: float) -> None:
        """Messages were fetched at ``now`` (the first call starts the drain-rate clock)."""
        self._weighed = True
        self._fair.drain.started(now)

    def finished(self, count: int, now: float) -> None:
        """``count`` more messages finished by ``now`` (feeds the drain rate)."""
        self._fair.drain.finished(count, now)

    def assigned(self, partitions: Iterable[PartitionId]) -> None:
        """New partitions are owned: while everything is paused, so are they."""
        if self.paused:
            self._source.pause(partitions)

    def forget(self, partitions: Iterable[PartitionId]) -> None:
        """``partitions`` are no longer owned."""
        for pid in partitions:
            self._fair.forget(pid)

    def paused_count(self, owned: Mapping[PartitionId, PartitionLoad]) -> int:
        """How many owned partitions are paused now, by either rule."""
        if self.paused:
            return len(owned)
        return sum(1 for pid in self._fair.over_share if pid in owned)

    def paused_partitions(self, owned: Mapping[PartitionId, PartitionLoad]) -> list[PartitionId]:
        """The owned partitions paused now, by either rule, in order (safe to call from
        another thread: each collection is copied in one step)."""
        if self.paused:
            return sorted(owned)
        return sorted(set(self._fair.over_share) & set(owned))

    def _set_paused(self, paused: bool, owned: Mapping[PartitionId, PartitionLoad]) -> None:
        if paused:
            self._source.pause(owned)
        else:
            self._source.resume(self._fair.resumable(owned))
        self.paused = paused
