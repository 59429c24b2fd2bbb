"""Per-partition offset tracking: what may be committed, and what a restart may skip.

:class:`PartitionOffsets` follows the offsets of one owned partition from fetch to
finish. Its commit offset is the first fetched offset that is not finished (or the next
offset to fetch when all are): committing it never loses work. Finished offsets above
that point are carried in the commit metadata (see :mod:`laneway.offsets.codec`)
and skipped when they are fetched again after a restart or a rebalance.

Offsets are kept as one byte of state per offset (0: never fetched, a gap; 1: fetched,
not finished; 2: finished) in a few byte arrays ("blocks") starting at the oldest
offset not yet committed. A byte array lets C code do the per-batch work: appending a
contiguous batch, finding the commit point, building the metadata window. Only marking
completions costs a Python step per offset (measured: about 0.1 s per million offsets
for fetch + finish + commit point, batches of 1,000). Gaps (transaction markers,
compaction) up to ``_MAX_GAP_FILL`` offsets are filled with zero bytes; a larger gap
starts a new block, so a sparse compacted topic costs memory per message, not per offset.

Epochs. A source that knows the epoch each record was written in (Kafka's leader epoch,
the embedded log's generation) passes the epochs of each batch; the tracker keeps them as
a short table of ``(first offset, epoch)`` and writes them into the metadata (version 2 of
:mod:`laneway.offsets.codec`), with the epoch of the record before the commit offset in
the position's ``leader_epoch``. A finished offset restored from the metadata is skipped
only when the record fetched there has the epoch it was claimed with: a record written at
that offset after the claim (the log lost its tail and was written again) is processed.
Claims of a version-1 map carry no epoch and are trusted as before (the source checked them
against the log end). A record fetched again below what is tracked with another epoch than
the one read there means the log was cut there and written again: see :meth:`diverges` and
:meth:`truncate`.
"""

from __future__ import annotations

from bisect import bisect_right
from collections import deque
from collections.abc import Iterable, Sequence
from collections.abc import Set as AbstractSet
from itertools import pairwise

from laneway.offsets.claim_epochs import UNKNOWN, EpochRuns, Segments
from laneway.offsets.codec import decode_claims, encode_window, max_span
from laneway.offsets.tracked_epochs import ANY_EPOCH, ClaimedEpochs, ReadEpochs
from laneway.types import CommitPosition

_FETCHED = 1
_FINISHED = 2
_MAX_GAP_FILL = 4096
_ONES = b"\x01" * 65536
_FINISHED_FLAGS = bytes(int(state == _FINISHED) for state in range(256))
"""Translation table: state ``_FINISHED`` -> 1, every other byte -> 0."""
_NO_SKIP: frozenset[int] = frozenset()


class _Block:
    """States of the offsets ``base .. base + len(states) - 1``."""

    __slots__ = ("base", "states")

    def __init__(self, base: int, states: bytearray) -> None:
        self.base = base
        self.states = states


class PartitionOffsets:
    """Tracks fetched and finished offsets of one partition and the position to commit.

    Create one per owned partition from its committed position (``None``: nothing
    committed, the start is known at the first fetch) and the broker's
    ``offset.metadata.max.bytes``. Then, on the consumer's control thread:

    * :meth:`fetched` with each polled batch's offsets; it returns those not to dispatch
      (finished before the restart, or already tracked);
    * hold back offsets above :attr:`dispatch_limit`; a finished offset further than
      ``max_span(max_bytes)`` past the commit offset could not be recorded in the
      metadata, so the limit is what guarantees commits never exceed the cap;
    * :meth:`finished` with completed offsets, in any order;
    * :meth:`declined` with fetched offsets not kept (a hot key's excess): they stay
      unfinished, and when they are fetched again (after a rewind) :meth:`fetched`
      returns them to dispatch, while every other offset fetched before is skipped;
    * :meth:`read_up_to` with the source's read position before a commit (offsets between
      the last record and it hold no record: transaction markers, compaction);
    * :meth:`position` to get what to commit; :attr:`version` changes when it may have.

    Tuning: ``max_metadata_bytes`` must not exceed the broker's setting (else commits
    fail), and a larger value lets more work run past one slow offset: about
    ``6 * max_metadata_bytes`` offsets (24,352 for the default 4096).

    Not thread-safe; cheap enough to call once per batch per partition in the hot path.
    """

    __slots__ = (
        "_blocks",
        "_cached",
        "_claims",
        "_declined",
        "_declined_min",
        "_max_bytes",
        "_next",
        "_read",
        "_refused",
        "_restored",
        "_span",
        "_version",
    )

    def __init__(self, committed: CommitPosition | None, max_metadata_bytes: int) -> None:
        self._span = max_span(max_metadata_bytes)
        self._max_bytes = max_metadata_bytes
        self._blocks: deque[_Block] = deque()
        self._restored: deque[int] = deque()
        self._version = 0
        self._cached: tuple[int, CommitPosition] | None = None
        self._declined: set[int] = set()
        self._declined_min = -1
        """The lowest declined offset (-1: none, or not known since it was fetched again)."""
        self._next = -1
        self._claims = ClaimedEpochs()
        self._refused: list[tuple[int, int, int]] = []
        if committed is None:
            self._read = ReadEpochs()
        else:
            self._next = committed.offset
            self._read = ReadEpochs(committed.offset, committed.leader_epoch)
            window, segments = decode_claims(
                committed.metadata, committed.offset, span_limit=self._span
            )
            first = committed.offset + 1
            self._restored.extend(i + first for i, flag in enumerate(window) if flag)
            if self._restored:
                self._claims.restore(first, segments)

    @property
    def started(self) -> bool:
        """Whether the start offset is known (committed, or something was fetched)."""
        return self._next >= 0

    @property
    def version(self) -> int:
        """A counter that changes whenever :meth:`position` may return something new."""
        return self._version

    @property
    def commit_offset(self) -> int | None:
        """The offset to commit: every earlier fetched offset is finished.

        The first fetched offset not finished; if there is none, the offset after the
        last fetched one (or the committed one), moved past offsets known finished from
        the restored metadata. ``None`` while the start is unknown.
        """
        if self._next < 0:
            return None
        return self._advance()

    @property
    def dispatch_limit(self) -> int:
        """The highest offset that may be dispatched now (-1 while the start is unknown).

        ``commit_offset + max_span(max_metadata_bytes)``: any set of offsets finished up
        to it fits in the metadata. It only grows.
        """
        if self._next < 0:
            return -1
        return self._advance() + self._span

    @property
    def next_offset(self) -> int:
        """The offset after the last one fetched (or the committed one); -1 while unknown."""
        return self._next

    def take_refused(self) -> list[tuple[int, int, int]]:
        """The restored claims not honoured since the last call, because the record fetched
        there has another epoch: ``(offset, claimed epoch, record epoch)``."""
        refused, self._refused = self._refused, []
        return refused

    @property
    def outstanding(self) -> int:
        """How many fetched offsets are not finished (dispatched or held back)."""
        return sum(block.states.count(_FETCHED) for block in self._blocks)

    @property
    def finished_beyond_count(self) -> int:
        """How many offsets above the commit offset are known finished."""
        if self._next >= 0:
            self._advance()
        return sum(block.states.count(_FINISHED) for block in self._blocks) + len(self._restored)

    @property
    def first_unfinished(self) -> int | None:
        """The oldest fetched offset not finished: the message holding the commit point
        (``None``: every fetched offset is finished)."""
        if self._next < 0:
            return None
        self._advance()  # drops the finished blocks: the first one left holds it
        return self._blocks[0].base if self._blocks else None

    @property
    def finished_runs(self) -> int:
        """How many runs of finished offsets lie above the commit offset: each has
        unfinished work (a gap) before it. Offsets restored from the metadata count as
        runs of their own. For a once-a-second look: it reads every tracked offset's state
        (C code, about a microsecond per thousand)."""
        if self._next < 0:
            return 0
        self._advance()
        runs = 0
        for block in self._blocks:
            flags = block.states.translate(_FINISHED_FLAGS)
            runs += flags.count(b"\x00\x01") + (flags[:1] == b"\x01")
        if self._restored:
            runs += 1 + sum(1 for a, b in pairwise(self._restored) if b != a + 1)
        return runs

    @property
    def fetch_head(self) -> int:
        """The offset after the last one fetched (-1 while the start is unknown)."""
        return self._next

    @property
    def declined_first(self) -> int | None:
        """The lowest offset declined and not fetched again (``None``: none): where to
        read the partition again from."""
        declined = self._declined
        if not declined:
            return None
        if self._declined_min < 0:
            self._declined_min = min(declined)
        return self._declined_min

    def declined(self, offsets: Iterable[int]) -> None:
        """Fetched offsets that were not kept (not dispatched): unfinished until they are
        fetched again and finished."""
        more = list(offsets)
        if not more:
            return
        self._declined.update(more)
        lowest = min(more)
        known = self._declined_min
        if (known >= 0 and lowest < known) or len(self._declined) == len(more):
            self._declined_min = lowest

    def forget_declined_below(self, start: int) -> int:
        """The partition's records below ``start`` were deleted (its log start moved there):
        declined offsets below it will never be fetched again, so they count as done (the
        commit point may pass them); how many there were."""
        gone = [offset for offset in self._declined if offset < start]
        if not gone:
            return 0
        self._declined.difference_update(gone)
        self._declined_min = -1
        self._finish_in_blocks(gone)
        self._version += 1
        return len(gone)

    def fetched(self, offsets: Sequence[int], epochs: EpochRuns | None = None) -> AbstractSet[int]:
        """Record a polled batch (increasing offsets, gaps allowed); return those to skip.

        Skipped offsets are not to be dispatched, nor reported to :meth:`finished`: they
        were finished before the restart (restored from the metadata with the epoch of the
        record fetched now, or from a version-1 map: they count as finished now), or they
        are at or below an offset already fetched (a replay after a seek: the tracked copy
        stands, but for a :meth:`declined` offset, which is dispatched this time; see
        :meth:`diverges` first) or below the committed offset. ``epochs``: the batch's
        epochs (``None``: unknown). Fastest with a ``list`` of consecutive offsets, the
        common case.
        """
        count = len(offsets)
        if not count:
            return _NO_SKIP
        first = offsets[0]
        last = offsets[-1]
        if self._next < 0:
            if first < 0:
                raise ValueError(f"offsets cannot be negative, got {first}")
            self._next = first
            before = None
        else:
            before = self._advance()
        restored = self._restored
        restored_count = len(restored)
        skip: AbstractSet[int]
        following = self._next
        if (
            first >= self._next
            and last - first == count - 1
            and (not restored or restored[0] > last)
            and offsets == list(range(first, last + 1))
        ):
            self._append_run(first, count)
            skip = _NO_SKIP
        else:
            skip = self._fetched_one_by_one(offsets, epochs)
        if last >= following:
            self._read.note(epochs, following)
        if self._advance() != before or len(restored) != restored_count:
            self._version += 1
        return skip

    def read_up_to(self, position: int) -> None:
        """The source has read the partition up to ``position`` (the next offset it will
        hand out): every offset below it that was not fetched holds no record to process
        (a transaction's commit or abort marker, an aborted record, an offset compaction
        removed). So the commit offset may move to ``position`` once everything fetched is
        finished, as a plain consumer's commit of its position does, instead of stopping
        after the last record (lag 1 behind every transaction marker for good).

        Ignored while the start is unknown, at or below what is tracked (a position moved
        back by a seek), and while finished offsets restored from the metadata lie below it
        (they are met when fetched). Cost: a few comparisons; call it once per commit."""
        if self._next < 0 or position <= self._next:
            return
        if self._restored and self._restored[0] < position:
            return
        self._next = position
        self._version += 1

    def finished(self, offsets: Iterable[int]) -> None:
        """Mark fetched offsets finished, in any order.

        Offsets already finished, skipped or committed are ignored (idempotent); an
        offset never fetched raises :class:`ValueError`.
        """
        self._version += 1
        blocks = self._blocks
        if len(blocks) != 1:
            self._finish_in_blocks(offsets)
            return
        states = blocks[0].states
        base = blocks[0].base
        size = len(states)
        for offset in offsets:
            index = offset - base
            if 0 <= index < size and states[index] == _FETCHED:
                states[index] = _FINISHED
            else:
                self._check_unfetched(offset)

    def position(self) -> CommitPosition | None:
        """The position to commit: commit offset and metadata of finished offsets beyond.

        ``None`` while the start is unknown. Equal positions compare equal, so a caller
        can skip a commit that would change nothing. The metadata always fits
        ``max_metadata_bytes``: finished offsets above :attr:`dispatch_limit` (possible
        only if the caller ignored it) are left out and would be processed again after a
        restart. Foreign metadata of the committed position is not preserved.
        """
        if self._next < 0:
            return None
        cached = self._cached
        if cached is not None and cached[0] == self._version:
            return cached[1]
        commit = self._advance()
        self._read.trim(commit)
        self._claims.trim(self._restored[0] if self._restored else None)
        window = self._window(commit)
        regions = self._regions(commit, len(window)) if window else None
        metadata = encode_window(commit, window, regions, self._max_bytes)
        epoch = self._read.before(commit)
        position = CommitPosition(commit, metadata, None if epoch == UNKNOWN else epoch)
        self._cached = (self._version, position)
        return position

    def diverges(self, offset: int, epoch: int) -> bool:
        """Whether a record fetched at ``offset``, below :attr:`next_offset`, in ``epoch``
        is not the record read there before (nor one before the committed position): it
        was written after them, so the log was cut at or before ``offset`` and written
        again (an unclean leader election; the client seeks back to where the logs part).

        Known epochs only: a record whose epoch is unknown, or fetched again where the
        epoch was not known, is taken for the record read before (a replay).
        """
        if self._next < 0 or offset >= self._next or epoch == UNKNOWN:
            return False
        return self._read.differs(offset, epoch)

    def truncate(self, offset: int) -> int:
        """Forget everything at and after ``offset`` (the log was cut there and written
        again): fetched states, restored claims, epochs. The commit offset moves back to
        ``offset`` if it was beyond. Returns how many fetched offsets at or after it were not
        finished (their messages are of records that no longer exist)."""
        unfinished = 0
        blocks = self._blocks
        while blocks and blocks[-1].base >= offset:
            unfinished += blocks.pop().states.count(_FETCHED)
        if blocks:
            block = blocks[-1]
            cut = offset - block.base
            if cut < len(block.states):
                unfinished += block.states.count(_FETCHED, cut)
                del block.states[cut:]
        self._restored.clear()
        self._claims.clear()
        if offset < self._next:
            self._next = offset
        self._read.cut(offset, self._next, not blocks)
        self._version += 1
        return unfinished

    def _regions(self, commit: int, size: int) -> Segments:
        """The epochs of ``commit + 1 .. commit + size`` as ``(distance, epoch)`` regions:
        fetched offsets by the records read, restored claims by their own (a version-1
        claim's as unknown)."""
        low = commit + 1
        high = low + size
        regions = self._read.regions(low, min(self._next, high))
        claims_from = max(low, self._next)
        if self._restored and claims_from < high:
            regions += self._claims.regions(low, claims_from, high)
        return regions

    def _advance(self) -> int:
        """Drop the finished prefix and return the commit offset (start must be known)."""
        blocks = self._blocks
        while blocks:
            block = blocks[0]
            states = block.states
            index = states.find(_FETCHED)
            if index >= 0:
                if index:
                    del states[:index]  # O(1): CPython moves a bytearray's start
                    block.base += index
                return block.base
            blocks.popleft()
        restored = self._restored
        # Claims of a version-1 map count before they are fetched; those with an epoch
        # only once the record fetched there shows it (see _fetched_one_by_one).
        while restored and restored[0] == self._next and self._claims.of(restored[0]) == ANY_EPOCH:
            restored.popleft()
            self._next += 1
        return self._next

    def _append_run(self, first: int, count: int) -> None:
        """Record ``first .. first + count - 1``, all new and none restored."""
        blocks = self._blocks
        gap = first - self._next
        run = _ONES[:count] if count <= len(_ONES) else b"\x01" * count
        if blocks and gap <= _MAX_GAP_FILL:
            states = blocks[-1].states
            if gap:
                states += bytes(gap)
            states += run
        else:
            blocks.append(_Block(first, bytearray(run)))
        self._next = first + count

    def _fetched_one_by_one(self, offsets: Sequence[int], epochs: EpochRuns | None) -> set[int]:
        skip: set[int] = set()
        restored = self._restored
        blocks = self._blocks
        following = self._next
        runs = epochs or [(0, UNKNOWN)]
        run = 0
        declined = self._declined
        for offset in offsets:
            if offset < following:
                if offset in declined:
                    declined.discard(offset)
                    if offset == self._declined_min:
                        self._declined_min = -1
                else:
                    skip.add(offset)
                continue
            state = _FETCHED
            while restored and restored[0] <= offset:
                if restored.popleft() == offset:
                    claimed = self._claims.of(offset)
                    while run + 1 < len(runs) and runs[run + 1][0] <= offset:
                        run += 1
                    if claimed == ANY_EPOCH or claimed == runs[run][1]:
                        state = _FINISHED
                        skip.add(offset)
                    else:
                        self._refused.append((offset, claimed, runs[run][1]))
            gap = offset - following
            if blocks and gap <= _MAX_GAP_FILL:
                states = blocks[-1].states
                if gap:
                    states += bytes(gap)
                states.append(state)
            else:
                blocks.append(_Block(offset, bytearray((state,))))
            following = offset + 1
        self._next = following
        return skip

    def _finish_in_blocks(self, offsets: Iterable[int]) -> None:
        blocks = self._blocks
        bases = [block.base for block in blocks]
        for offset in offsets:
            at = bisect_right(bases, offset) - 1
            if at >= 0:
                block = blocks[at]
                index = offset - block.base
                states = block.states
                if index < len(states) and states[index] == _FETCHED:
                    states[index] = _FINISHED
                    continue
            self._check_unfetched(offset)

    def _check_unfetched(self, offset: int) -> None:
        if self._next < 0 or offset >= self._next:
            raise ValueError(f"offset {offset} was never fetched, it cannot be finished")

    def _window(self, commit: int) -> bytearray:
        """Flags of ``commit + 1 .. commit + span``: byte ``i`` is 1 if ``commit+1+i`` finished."""
        top = self._next - 1
        if self._restored:
            top = max(top, self._restored[-1])
        window = bytearray(max(0, min(self._span, top - commit)))
        end = commit + 1 + len(window)
        for block in self._blocks:
            low = max(block.base, commit + 1)
            high = min(block.base + len(block.states), end)
            if low < high:
                part = block.states[low - block.base : high - block.base]
                window[low - commit - 1 : high - commit - 1] = part.translate(_FINISHED_FLAGS)
        for offset in self._restored:
            if offset >= end:
                break
            window[offset - commit - 1] = 1
        return window
