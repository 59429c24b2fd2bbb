"""OwnedPartition: what the control plane knows about one partition it owns."""

from __future__ import annotations

from bisect import bisect_right
from collections import deque

from laneway.offsets.claim_epochs import EpochRuns
from laneway.offsets.footprint import Footprint, footprint
from laneway.offsets.tracker import PartitionOffsets
from laneway.types import CommitPosition, Message


class OwnedPartition:
    """Offsets, held-back messages and in-engine count of one owned partition.

    Messages whose offset lies beyond the tracker's dispatch limit (the furthest offset
    whose completion could still be recorded within the commit-metadata cap) are held
    here instead of being dispatched, and released as the commit point advances. This
    is how a stuck offset near the cap stops new work of its partition only, without
    ever dropping the finished-offset map.

    When the log turns out to have been cut and written again (see :meth:`cut`), the
    messages still running for the records that were cut away are *fenced*: their
    completions are discarded, and the partition's new messages are held back until the
    last of them came back, so that no completion of a record that is gone can count for
    the record now at its offset.
    """

    __slots__ = (
        "bytes",
        "fence_from",
        "fenced_left",
        "held",
        "in_engine",
        "last_committed",
        "tracker",
    )

    def __init__(self, committed: CommitPosition | None, metadata_max_bytes: int) -> None:
        self.tracker = PartitionOffsets(committed, metadata_max_bytes)
        self.held: deque[Message] = deque()
        self.in_engine = 0
        self.bytes = 0
        """The footprint of the buffered messages (see :mod:`laneway.offsets.footprint`)."""
        self.last_committed: CommitPosition | None = committed
        self.fence_from = -1
        """The offset the log was cut at, while :attr:`fenced_left` messages of records cut
        away are still in the engine."""
        self.fenced_left = 0

    def accept(
        self, batch: list[Message], epochs: EpochRuns | None = None
    ) -> tuple[list[Message], int, Footprint]:
        """Record a fetched batch (of the ``epochs`` given, if known); return the messages
        to dispatch now, how many were skipped, and the footprint of those kept (added to
        :attr:`bytes`)."""
        skip = self.tracker.fetched([m.offset for m in batch], epochs)
        skipped = 0
        if skip:
            kept = [m for m in batch if m.offset not in skip]
            skipped = len(batch) - len(kept)
            batch = kept
        weight = footprint(batch)
        self.bytes += weight.total
        if self.held or self.fenced_left:
            self.held.extend(batch)
            return [], skipped, weight
        limit = self.tracker.dispatch_limit
        if batch and batch[-1].offset > limit:
            cut = bisect_right(batch, limit, key=_offset)
            self.held.extend(batch[cut:])
            batch = batch[:cut]
        self.in_engine += len(batch)
        return batch, skipped, weight

    def unbuffer(self, count: int) -> int:
        """``count`` messages of the partition settled or came back unstarted: take them off
        :attr:`in_engine` and their share of :attr:`bytes`; return the bytes taken.

        The share is the average of what the partition buffers, so settling never touches
        the payloads again (reading every settled message's value cost the sync engine a
        third of its trivial-message throughput: cold memory). It is exact for messages of
        one size, and whatever the sizes, :attr:`bytes` is 0 again once the partition holds
        nothing, so an estimate never outlives the messages it was made for.
        """
        buffered = self.buffered
        self.in_engine -= count
        before = self.bytes
        self.bytes = before * (buffered - count) // buffered if buffered > count else 0
        return before - self.bytes

    def cut(self, offset: int) -> tuple[int, int]:
        """The log was cut at ``offset`` and written again: forget the tracked offsets from
        there (see :meth:`PartitionOffsets.truncate
        <laneway.offsets.tracker.PartitionOffsets.truncate>`), drop the held messages of
        records that are gone and fence those still in the engine. Returns how many held
        messages were dropped and their footprint (taken off :attr:`bytes`)."""
        unfinished = self.tracker.truncate(offset)
        kept = deque(m for m in self.held if m.offset < offset)
        dropped = len(self.held) - len(kept)
        share = 0
        if dropped:
            buffered = self.buffered
            share = self.bytes * dropped // buffered if buffered > dropped else self.bytes
            self.bytes -= share
            self.held = kept
        running = unfinished - dropped
        if running > 0:
            self.fence_from = offset if not self.fenced_left else min(self.fence_from, offset)
            self.fenced_left += running
        return dropped, share

    def fenced(self, offsets: list[int]) -> list[int]:
        """Of completed ``offsets``, those of records cut away (taken off :attr:`fenced_left`;
        the caller discards them): at or after :attr:`fence_from` while any are left."""
        if not self.fenced_left:
            return []
        stale = [o for o in offsets if o >= self.fence_from][: self.fenced_left]
        self.fenced_left -= len(stale)
        return stale

    def release(self) -> list[Message]:
        """Held messages that now fit under the dispatch limit (none while messages of
        records cut away are still running)."""
        held = self.held
        if not held or self.fenced_left:
            return []
        limit = self.tracker.dispatch_limit
        released: list[Message] = []
        while held and held[0].offset <= limit:
            released.append(held.popleft())
        self.in_engine += len(released)
        return released

    @property
    def buffered(self) -> int:
        """Fetched, unfinished messages of this partition (dispatched or held back)."""
        return self.in_engine + len(self.held)

    def position_to_commit(self) -> CommitPosition | None:
        """The position to commit, or ``None`` if it equals the last one committed."""
        position = self.tracker.position()
        if position == self.last_committed:
            return None
        return position


def _offset(message: Message) -> int:
    return message.offset
