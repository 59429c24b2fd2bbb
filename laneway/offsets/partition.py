"""OwnedPartition: what the control plane knows about one partition it owns."""

from __future__ import annotations

from bisect import bisect_right
from collections import deque

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
    """

    __slots__ = ("bytes", "held", "in_engine", "last_committed", "tracker")

    def __init__(self, committed: CommitPosition | None, metadata_max_bytes: int) -> None:
        self.tracker = PartitionOffsets(committed, metadata_max_bytes)
        self.held: deque[Message] = deque()
        self.in_engine = 0
        self.bytes = 0
        """The footprint of the buffered messages (see :mod:`laneway.offsets.footprint`)."""
        self.last_committed: CommitPosition | None = committed

    def accept(self, batch: list[Message]) -> tuple[list[Message], int, Footprint]:
        """Record a fetched batch; return the messages to dispatch now, how many were
        skipped, and the footprint of those kept (added to :attr:`bytes`)."""
        skip = self.tracker.fetched([m.offset for m in batch])
        skipped = 0
        if skip:
            kept = [m for m in batch if m.offset not in skip]
            skipped = len(batch) - len(kept)
            batch = kept
        weight = footprint(batch)
        self.bytes += weight.total
        if self.held:
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

    def release(self) -> list[Message]:
        """Held messages that now fit under the dispatch limit."""
        held = self.held
        if not held:
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
