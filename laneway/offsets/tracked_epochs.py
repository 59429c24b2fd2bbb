"""The epochs a partition's tracker keeps: of the records it read, and of the claims it
restored from commit metadata (see :mod:`laneway.offsets.claim_epochs` for what an epoch
is and how a map carries them).

Both are short tables of ``(first offset, epoch)``, each epoch holding up to the next
entry: a partition sees a new epoch only when its leader changes (or the embedded log
loses a tail), so they stay a few entries long and are trimmed as the commit point moves.
"""

from __future__ import annotations

from bisect import bisect_right

from laneway.offsets.claim_epochs import UNKNOWN, EpochRuns, Segments

ANY_EPOCH = -2
"""The epoch of a claim restored from a version-1 map: it holds for any record."""


class ReadEpochs:
    """The epochs of the records read from one partition, and of the record before the
    committed position it started from (the position's ``leader_epoch``)."""

    __slots__ = ("_at", "_base_epoch", "_base_offset", "_epochs")

    def __init__(self, committed_offset: int = -1, committed_epoch: int | None = None) -> None:
        self._at: list[int] = []
        self._epochs: list[int] = []
        # The epoch of the record before offset _base_offset (the committed position's).
        self._base_offset = committed_offset
        self._base_epoch = UNKNOWN if committed_epoch is None else committed_epoch

    def note(self, epochs: EpochRuns | None, since: int) -> None:
        """Record the epochs of newly read offsets (those from ``since`` on)."""
        runs = epochs if epochs else [(since, UNKNOWN)]
        table = self._epochs
        for index, (start, epoch) in enumerate(runs):
            if index + 1 < len(runs) and runs[index + 1][0] <= since:
                continue
            if not table or table[-1] != epoch:
                self._at.append(max(start, since))
                table.append(epoch)

    def trim(self, commit: int) -> None:
        """Drop the epochs of offsets below ``commit - 1``."""
        at = self._at
        while len(at) > 1 and at[1] <= commit - 1:
            del at[0]
            del self._epochs[0]

    def before(self, commit: int) -> int:
        """The epoch of the record at ``commit - 1``, as far as known."""
        at = bisect_right(self._at, commit - 1) - 1
        if at >= 0:
            return self._epochs[at]
        return self._base_epoch if commit == self._base_offset else UNKNOWN

    def differs(self, offset: int, epoch: int) -> bool:
        """Whether a record at ``offset`` (already read past) in known ``epoch`` is not the
        record read there before, nor one before the committed position."""
        at = bisect_right(self._at, offset) - 1
        if at >= 0:
            known = self._epochs[at]
            return known != UNKNOWN and known != epoch
        # Below every record read: a record rewritten there has a newer epoch than any
        # the log had before (a new leader's), so newer than the first one read.
        floor = self._epochs[0] if self._epochs else self._base_epoch
        return floor != UNKNOWN and epoch > floor

    def cut(self, offset: int, next_offset: int, nothing_tracked: bool) -> None:
        """Forget the epochs at and after ``offset`` (the log was cut there);
        ``next_offset`` is where reading goes on, ``nothing_tracked`` whether no fetched
        offset is left (then the committed position's epoch no longer applies)."""
        while self._at and self._at[-1] >= offset:
            self._at.pop()
            self._epochs.pop()
        if nothing_tracked and not self._at and self._base_offset != next_offset:
            self._base_offset = next_offset
            self._base_epoch = UNKNOWN

    def regions(self, low: int, end: int) -> Segments:
        """The epochs of read offsets ``low .. end - 1`` as ``(distance from low, epoch)``."""
        if low >= end:
            return []
        at = max(0, bisect_right(self._at, low) - 1)
        regions: Segments = [(0, self._epochs[at] if self._epochs else UNKNOWN)]
        for index in range(at + 1, len(self._at)):
            start = self._at[index]
            if start >= end:
                break
            regions.append((start - low, self._epochs[index]))
        return regions


class ClaimedEpochs:
    """The epochs of the finished offsets restored from a commit-metadata map: a claim
    counts only for a record of its epoch (:data:`ANY_EPOCH` for a version-1 map's)."""

    __slots__ = ("_at", "_epochs")

    def __init__(self) -> None:
        self._at: list[int] = []
        self._epochs: list[int] = []

    def restore(self, first: int, segments: Segments | None) -> None:
        """The map's segments over claims from ``first`` on (``None``: a version-1 map)."""
        for distance, epoch in segments or [(0, ANY_EPOCH)]:
            self._at.append(first + distance)
            self._epochs.append(epoch)

    def of(self, offset: int) -> int:
        """The epoch the claim of ``offset`` was made in."""
        at = bisect_right(self._at, offset) - 1
        return self._epochs[at] if at >= 0 else ANY_EPOCH

    def trim(self, first_claim: int | None) -> None:
        """Drop the epochs of claims consumed (``first_claim``: the lowest left, if any)."""
        at = self._at
        while len(at) > 1 and (first_claim is None or at[1] <= first_claim):
            del at[0]
            del self._epochs[0]

    def clear(self) -> None:
        self._at.clear()
        self._epochs.clear()

    def regions(self, low: int, start: int, end: int) -> Segments:
        """The epochs of claims in ``start .. end - 1`` as ``(distance from low, epoch)``
        (a version-1 claim's as unknown)."""
        at = bisect_right(self._at, start) - 1
        first = self._epochs[at] if at >= 0 else UNKNOWN
        regions: Segments = [(start - low, UNKNOWN if first == ANY_EPOCH else first)]
        for index in range(at + 1, len(self._at)):
            begins = self._at[index]
            if begins >= end:
                break
            epoch = self._epochs[index]
            regions.append((begins - low, UNKNOWN if epoch == ANY_EPOCH else epoch))
        return regions
