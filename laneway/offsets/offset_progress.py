"""OffsetProgress: the progress of a source that commits offsets (Kafka groups, embedded log)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Collection, Mapping
from itertools import groupby
from operator import attrgetter

from laneway.logs import get_logger
from laneway.offsets.backlog import PartitionBacklog
from laneway.offsets.partition import OwnedPartition
from laneway.offsets.progress import OffsetCommitter, ProgressCounts
from laneway.types import CommitPosition, Failure, Message, PartitionId, RecordEpochs

log = get_logger(__name__)

_partition_of = attrgetter("topic", "partition")


class OffsetProgress:
    """:class:`~laneway.offsets.progress.Progress` by committed offsets, per partition.

    Each owned partition has an :class:`~laneway.offsets.partition.OwnedPartition`: its
    offset tracker (the commit point is the first unfinished offset; finished offsets
    beyond it travel in the commit metadata, capped at ``metadata_max_bytes``) and the
    messages held back until the commit point moves close enough for their completion to
    fit that cap. :meth:`commit` sends each partition's new position to the source's
    :class:`~laneway.offsets.progress.OffsetCommitter`, skipping partitions whose position
    did not change.

    When a partition is given up while some of its messages still run (a revocation's
    drain timed out, or it was lost), those are *zombies*: their completions are settled
    first when they come back, then discarded if the partition is not owned (fenced), or
    applied to the new ownership only where it fetched the same offsets again.

    It also weighs what is buffered (``counts.buffered_bytes``, the footprint of values,
    keys and headers, see :mod:`laneway.offsets.footprint`) for ``max_buffered_bytes``:
    exactly as messages are fetched, and by the partition's average as they settle (see
    :meth:`OwnedPartition.unbuffer <laneway.offsets.partition.OwnedPartition.unbuffer>`).

    With the source's :class:`~laneway.types.RecordEpochs` (``epochs``), a
    finished offset restored from the commit metadata is skipped only for the record it was
    claimed about (its epoch), and a record fetched again below what a partition tracks,
    with another epoch, shows the log was cut and written again there: the partition
    forgets what it tracked from that offset on (its commit point moves back to it if it
    was beyond) and fences the messages still running for the records that are gone. Each
    is one WARNING naming the partition and the offsets.

    With ``read_positions`` (the source's read position of each partition: how far it has
    read, past records it never hands out, such as transaction markers), a partition whose
    fetched messages are all finished commits that position, so its lag reads 0 as a plain
    consumer's does (see :meth:`~laneway.offsets.tracker.PartitionOffsets.read_up_to`).

    Tuning: ``metadata_max_bytes`` must not exceed the broker's
    ``offset.metadata.max.bytes`` (4,096 by default); see
    :class:`~laneway.offsets.tracker.PartitionOffsets`.
    """

    def __init__(
        self,
        committer: OffsetCommitter,
        metadata_max_bytes: int,
        epochs: RecordEpochs | None = None,
        read_positions: Callable[[list[PartitionId]], Mapping[PartitionId, int]] | None = None,
    ) -> None:
        self._committer = committer
        self._epochs = epochs
        self._read_positions = read_positions
        self._metadata_max_bytes = metadata_max_bytes
        self._owned: dict[PartitionId, OwnedPartition] = {}
        self._zombies: dict[PartitionId, int] = {}
        self._committed: dict[PartitionId, int] = {}
        self._counts = ProgressCounts()

    @property
    def counts(self) -> ProgressCounts:
        return self._counts

    @property
    def partitions(self) -> Mapping[PartitionId, OwnedPartition]:
        return self._owned

    def committed(self) -> dict[PartitionId, int]:
        return dict(self._committed)

    def backlog(self, ends: Mapping[PartitionId, int]) -> tuple[PartitionBacklog, ...] | None:
        """The backlog of each owned partition whose log end is known, in (topic, partition)
        order.

        ``committed`` and ``lag`` are those of the last commit, as Kafka (and ``laneway lag``)
        show them. The backlog is what the consumer knows now, which is the commit metadata's
        figure or fresher by up to a ``commit_interval``: the offsets from its commit point on,
        less those known finished beyond it (read from the offset tracker's byte states, not
        by decoding metadata, so a sample costs microseconds per partition however fragmented
        the finished offsets are), with the runs of finished offsets beyond the commit point
        and the first unfinished one. A partition the group never committed counts from where
        the consumer would commit now; one it has not read yet is left out, since where it
        starts is not known (``auto.offset.reset`` decides at the first fetch).
        """
        found: list[PartitionBacklog] = []
        for pid, owned in sorted(self._owned.items()):
            end, tracker = ends.get(pid), owned.tracker
            now = tracker.commit_offset
            if end is None or now is None:
                continue
            last = owned.last_committed
            committed = None if last is None else min(last.offset, now)
            lag = max(0, end - (now if committed is None else committed))
            left = max(0, end - now) - tracker.finished_beyond_count
            backlog = min(lag, max(0, left))
            runs, first = tracker.finished_runs, tracker.first_unfinished
            found.append(
                PartitionBacklog(
                    pid[0], pid[1], committed, end, lag, lag - backlog, backlog, runs, first
                )
            )
        return tuple(found)

    def assign(self, positions: Mapping[PartitionId, CommitPosition | None]) -> None:
        for pid, position in positions.items():
            self._owned[pid] = OwnedPartition(position, self._metadata_max_bytes)
            if position is not None:
                self._committed[pid] = position.offset

    def give_up(self, partitions: Collection[PartitionId]) -> None:
        counts = self._counts
        for pid in partitions:
            partition = self._owned.pop(pid)
            counts.buffered -= len(partition.held) + partition.in_engine
            counts.buffered_bytes -= partition.bytes
            if partition.in_engine:
                self._zombies[pid] = self._zombies.get(pid, 0) + partition.in_engine

    def accept(self, messages: list[Message]) -> list[Message]:
        dispatch: list[Message] = []
        owned = self._owned
        counts = self._counts
        epochs = self._epochs
        start = 0
        for pid, group in groupby(messages, key=_partition_of):
            batch = list(group)
            first = start
            start += len(batch)
            partition = owned.get(pid)
            if partition is None:
                continue
            runs = None if epochs is None else epochs.runs(first, batch)
            if runs and batch[0].offset < partition.tracker.next_offset:
                self._check_rewritten(pid, partition, batch[0].offset, runs[0][1])
            runnable, skipped, weight = partition.accept(batch, runs)
            refused = partition.tracker.take_refused()
            if refused:
                _warn_refused(pid, refused)
            counts.skipped += skipped
            counts.buffered += len(batch) - skipped
            counts.buffered_bytes += weight.total
            if weight.largest > counts.largest_message:
                counts.largest_message = weight.largest
            dispatch.extend(runnable)
        return dispatch

    def records_deleted(self, pid: PartitionId, offset: int, start: int) -> int:
        """The source will not read ``pid``'s records from ``offset`` up to ``start`` (they
        were deleted from the log before it read them): count those this partition never
        fetched, and the messages a hot key declined below ``start`` (they will not be read
        again either), in :attr:`counts`; return how many that is."""
        partition = self._owned.get(pid)
        lost = max(0, start - offset)
        if partition is not None:
            tracker = partition.tracker
            head = tracker.fetch_head
            lost = max(0, start - max(offset, head)) if head >= 0 else lost
            lost += tracker.forget_declined_below(start)
        deleted = self._counts.deleted
        deleted[pid[0]] = deleted.get(pid[0], 0) + lost
        return lost

    def unstarted(self, messages: list[Message]) -> None:
        counts = self._counts
        for pid, group in groupby(messages, key=_partition_of):
            offsets = [m.offset for m in group]
            partition = self._owned.get(pid)
            if partition is not None:
                partition.fenced(offsets)  # never to come back: not waited for
                counts.buffered -= len(offsets)
                counts.buffered_bytes -= partition.unbuffer(len(offsets))

    def decline(self, messages: list[Message]) -> None:
        counts = self._counts
        for pid, offsets in _offsets_by_partition(messages).items():
            partition = self._owned.get(pid)
            if partition is None:
                continue
            counts.buffered -= len(offsets)
            counts.buffered_bytes -= partition.unbuffer(len(offsets))
            partition.tracker.declined(offsets)

    def declined(self) -> dict[PartitionId, tuple[int, int]]:
        found: dict[PartitionId, tuple[int, int]] = {}
        for pid, partition in self._owned.items():
            tracker = partition.tracker
            first = tracker.declined_first
            if first is not None:
                found[pid] = first, tracker.fetch_head
        return found

    def failed(self, failures: list[Failure]) -> list[Failure]:
        """Engines retried in place already: every failure is given up."""
        return failures

    def awaiting(self, now: float) -> int:
        """A partitioned log can always be polled (backpressure pauses partitions instead)."""
        return 0

    def settle(self, finished: list[Message], given_up: list[Message]) -> list[Message]:
        """Finished and given-up messages alike move their partition's commit point."""
        messages = finished + given_up if given_up else finished
        owned = self._owned
        counts = self._counts
        released: list[Message] = []
        for pid, offsets in _offsets_by_partition(messages).items():
            partition = owned.get(pid)
            # Completions of a partition's previous ownership ("zombies", still running
            # when it was given up) are settled first; they were already unbuffered.
            stale = min(self._zombies.get(pid, 0), len(offsets))
            if stale:
                self._zombies[pid] -= stale
            if partition is None:
                counts.fenced += len(offsets)
                continue
            live = len(offsets) - stale
            if live:
                counts.buffered -= live
                counts.buffered_bytes -= partition.unbuffer(live)
            cut_away = partition.fenced(offsets)
            if cut_away:
                counts.fenced += len(cut_away)
                gone = set(cut_away)
                offsets = [o for o in offsets if o not in gone]
            if stale:
                _finish_known(partition, offsets)
            else:
                partition.tracker.finished(offsets)
            if partition.held:
                released.extend(partition.release())
        return released

    def _check_rewritten(
        self, pid: PartitionId, partition: OwnedPartition, offset: int, epoch: int
    ) -> None:
        """A record fetched again at ``offset`` below what ``partition`` tracks: if its
        epoch shows it is not the record read there before, cut the partition there."""
        tracker = partition.tracker
        if not tracker.diverges(offset, epoch):
            return
        commit = tracker.commit_offset
        dropped, weight = partition.cut(offset)
        self._counts.buffered -= dropped
        self._counts.buffered_bytes -= weight
        log.warning(
            "%s[%d]: the log was cut at offset %d and written again (its records there are "
            "now of epoch %d, an unclean leader election or a lost tail): processing from "
            "there%s, %d message(s) of records that are gone fenced",
            pid[0],
            pid[1],
            offset,
            epoch,
            f" (the commit point moves back from {commit})"
            if commit is not None and commit > offset
            else "",
            partition.fenced_left,
        )

    def running(self, partitions: Collection[PartitionId]) -> int:
        owned = self._owned
        return sum(owned[pid].in_engine for pid in partitions if pid in owned)

    def commit(self, partitions: Collection[PartitionId]) -> None:
        positions = self.positions_to_commit(partitions)
        if not positions:
            return
        self._committer.commit(positions)
        self.committed_now(positions)

    def positions_to_commit(
        self, partitions: Collection[PartitionId]
    ) -> dict[PartitionId, CommitPosition]:
        """The new position of each owned partition of ``partitions`` whose position moved
        since its last commit."""
        positions: dict[PartitionId, CommitPosition] = {}
        owned = self._owned
        mine = [pid for pid in partitions if pid in owned]
        read = {} if self._read_positions is None or not mine else self._read_positions(mine)
        for pid in partitions:
            partition = owned.get(pid)
            if partition is None:
                continue
            up_to = read.get(pid)
            if up_to is not None:
                partition.tracker.read_up_to(up_to)
            position = partition.position_to_commit()
            if position is not None:
                positions[pid] = position
        return positions

    def committed_now(self, positions: Mapping[PartitionId, CommitPosition]) -> None:
        """``positions`` were just committed."""
        self._counts.commits += 1
        for pid, position in positions.items():
            self._owned[pid].last_committed = position
            self._committed[pid] = position.offset


def _offsets_by_partition(messages: list[Message]) -> dict[PartitionId, list[int]]:
    """Offsets per partition, in the order given. Completions arrive interleaved (every
    worker reports its own lane), so this is one pass rather than a group per message."""
    grouped: dict[PartitionId, list[int]] = {}
    for message in messages:
        pid = (message.topic, message.partition)
        offsets = grouped.get(pid)
        if offsets is None:
            grouped[pid] = [message.offset]
        else:
            offsets.append(message.offset)
    return grouped


def _warn_refused(pid: PartitionId, refused: list[tuple[int, int, int]]) -> None:
    offset, claimed, found = refused[0]
    log.warning(
        "%s[%d]: the commit metadata claims %d offset(s) finished (first %d, read in epoch %d) "
        "whose records now are of another epoch (%d: written after the claim, the log lost "
        "its tail); those records are processed",
        pid[0],
        pid[1],
        len(refused),
        offset,
        claimed,
        found,
    )


def _finish_known(partition: OwnedPartition, offsets: list[int]) -> None:
    """Finish offsets one by one, ignoring those the current ownership never fetched (a
    zombie's completion may name an offset not fetched again yet)."""
    for offset in offsets:
        with contextlib.suppress(ValueError):
            partition.tracker.finished((offset,))
