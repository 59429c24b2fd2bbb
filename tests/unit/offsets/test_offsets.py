"""PartitionOffsets: commit point, gaps, restored skips and the metadata cap, against a model."""

from __future__ import annotations

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from laneway.offsets.claim_epochs import MAX_EPOCH
from laneway.offsets.codec import decode, encode, encode_window, max_span
from laneway.offsets.tracker import PartitionOffsets
from laneway.types import CommitPosition

DEFAULT = 4096
SPAN = max_span(DEFAULT)


def finished_in(position: CommitPosition | None, max_bytes: int = DEFAULT) -> frozenset[int]:
    assert position is not None
    return decode(position.metadata, position.offset, span_limit=max_span(max_bytes))


def test_contiguous_offsets_advance_the_commit_point() -> None:
    t = PartitionOffsets(CommitPosition(0), DEFAULT)
    assert t.fetched(list(range(10))) == set()
    assert t.commit_offset == 0
    assert t.outstanding == 10
    t.finished(range(5))
    assert t.commit_offset == 5
    t.finished(range(5, 10))
    assert t.commit_offset == 10
    assert t.outstanding == 0
    assert t.position() == CommitPosition(10, "")


def test_out_of_order_finishes_wait_for_the_oldest() -> None:
    t = PartitionOffsets(CommitPosition(0), DEFAULT)
    t.fetched(list(range(10)))
    t.finished([7, 5, 9])
    assert t.commit_offset == 0
    assert t.finished_beyond_count == 3
    assert finished_in(t.position()) == {5, 7, 9}
    t.finished([3, 0, 2, 1, 4])
    assert t.commit_offset == 6
    assert t.finished_beyond_count == 2
    assert t.position() == CommitPosition(6, encode(6, {7, 9}))
    t.finished([6, 8])
    assert t.position() == CommitPosition(10, "")


def test_gaps_are_not_waited_for() -> None:
    t = PartitionOffsets(CommitPosition(0), DEFAULT)
    t.fetched([0, 1, 3, 4, 10])  # 2 and 5..9: transaction markers or compacted away
    t.finished([0, 1])
    assert t.commit_offset == 3
    t.finished([4, 10])
    assert t.commit_offset == 3
    assert finished_in(t.position()) == {4, 10}
    t.finished([3])
    assert t.commit_offset == 11
    t.fetched([15, 16])  # a gap before the batch
    assert t.commit_offset == 15


def test_a_huge_gap_costs_no_memory_and_is_skipped() -> None:
    t = PartitionOffsets(CommitPosition(0), DEFAULT)
    t.fetched([0, 1])
    t.fetched([10**12, 10**12 + 1])
    t.fetched([2 * 10**12])
    t.finished([10**12 + 1, 1, 2 * 10**12])
    assert t.commit_offset == 0
    assert t.outstanding == 2
    t.finished([0])
    assert t.commit_offset == 10**12
    assert finished_in(t.position()) == {10**12 + 1}  # 2 * 10**12 is beyond the cap's reach
    t.finished([10**12])
    assert t.position() == CommitPosition(2 * 10**12 + 1, "")


def test_a_restart_skips_exactly_what_finished_beyond_a_hole() -> None:
    a = PartitionOffsets(CommitPosition(0), DEFAULT)
    a.fetched(list(range(100)))
    a.finished(o for o in range(100) if o not in (10, 50))
    position = a.position()
    assert position is not None
    assert position.offset == 10
    assert len(position.metadata) < 40

    b = PartitionOffsets(position, DEFAULT)
    assert b.commit_offset == 10
    assert b.position() == position  # nothing changed yet: the same position
    skip = b.fetched(list(range(10, 120)))
    assert skip == set(range(11, 100)) - {50}
    assert b.outstanding == 112 - 90
    b.finished([10])
    assert b.commit_offset == 50
    b.finished([50])
    assert b.commit_offset == 100
    b.finished(range(100, 120))
    assert b.position() == CommitPosition(120, "")


def test_restored_offsets_not_fetched_yet_are_carried_forward() -> None:
    t = PartitionOffsets(CommitPosition(10, encode(10, {11, 12, 15, 500})), DEFAULT)
    assert t.finished_beyond_count == 4
    assert t.fetched([10]) == set()
    t.finished([10])
    assert t.commit_offset == 13  # 11 and 12 are known finished
    assert finished_in(t.position()) == {15, 500}
    assert t.fetched([11, 12, 13, 14, 15, 16]) == {11, 12, 15}
    t.finished([13, 14])
    assert t.commit_offset == 16
    assert finished_in(t.position()) == {500}


def test_restored_offsets_that_vanished_are_dropped() -> None:
    t = PartitionOffsets(CommitPosition(10, encode(10, {12, 13, 20})), DEFAULT)
    assert t.fetched([10, 11, 14]) == set()  # 12 and 13 were compacted away
    assert finished_in(t.position()) == {20}
    t.finished([10, 11, 14])
    assert t.commit_offset == 15
    assert t.fetched([15, 20, 21]) == {20}


def test_replays_and_offsets_below_the_committed_one_are_skipped() -> None:
    t = PartitionOffsets(CommitPosition(100), DEFAULT)
    assert t.fetched(list(range(95, 105))) == set(range(95, 100))
    assert t.fetched(list(range(102, 110))) == set(range(102, 105))
    assert t.outstanding == 10
    t.finished(range(100, 110))
    assert t.commit_offset == 110
    assert t.fetched([108, 109, 110]) == {108, 109}


def test_an_unknown_start_is_set_by_the_first_fetch() -> None:
    t = PartitionOffsets(None, DEFAULT)
    assert not t.started
    assert t.commit_offset is None
    assert t.position() is None
    assert t.dispatch_limit == -1
    t.finished([])
    t.fetched(list(range(500, 510)))
    assert t.started
    assert t.commit_offset == 500
    assert t.dispatch_limit == 500 + SPAN
    assert t.position() == CommitPosition(500, "")


def test_finishing_is_idempotent_but_unfetched_offsets_are_refused() -> None:
    t = PartitionOffsets(CommitPosition(0), DEFAULT)
    t.fetched([0, 1, 2, 5])
    t.finished([1, 1])
    t.finished([1, 3])  # 3 is a gap below the last fetched offset: nothing to do
    assert t.outstanding == 3
    assert t.finished_beyond_count == 1
    assert finished_in(t.position()) == {1}
    with pytest.raises(ValueError, match="never fetched"):
        t.finished([6])
    t.fetched([10**9])
    with pytest.raises(ValueError, match="never fetched"):
        t.finished([10**9 + 1])  # the multi-block path refuses too
    with pytest.raises(ValueError, match="never fetched"):
        PartitionOffsets(None, DEFAULT).finished([0])
    with pytest.raises(ValueError, match="negative"):
        PartitionOffsets(None, DEFAULT).fetched([-1, 0])


def test_the_dispatch_limit_keeps_the_metadata_under_the_cap() -> None:
    max_bytes = 60  # 37 header bytes (one epoch) + 23 base64 characters: a 17-byte bitset
    span = max_span(max_bytes)
    assert span == 136
    t = PartitionOffsets(CommitPosition(10**18), max_bytes)
    t.fetched(list(range(10**18, 10**18 + 1000)))
    assert t.dispatch_limit == 10**18 + span
    # The worst case the limit allows: every other offset finished, up to the limit.
    t.finished(range(10**18 + span, 10**18, -2))
    position = t.position()
    assert position is not None
    assert len(position.metadata) <= max_bytes
    assert len(finished_in(position, max_bytes)) == span // 2
    # One more beyond the limit would not fit; the tracker leaves it out instead.
    t.finished([10**18 + span + 1])
    assert t.position() == position
    beyond = sorted(finished_in(position, max_bytes) | {10**18 + span + 1})
    window = bytes(1 if 10**18 + 1 + i in beyond else 0 for i in range(span + 1))
    assert len(encode_window(10**18, window, [(0, MAX_EPOCH)])) > max_bytes
    t.finished([10**18, 10**18 + 1])
    assert t.commit_offset == 10**18 + 3
    assert t.dispatch_limit == 10**18 + 3 + span


def test_a_lower_cap_drops_what_it_cannot_hold_and_a_tiny_one_serialises() -> None:
    wide = encode(0, set(range(1, 1000, 2)))
    assert len(wide) > 100
    narrow = PartitionOffsets(CommitPosition(0, wide), 100)
    position = narrow.position()
    assert position is not None and len(position.metadata) <= 100
    assert finished_in(position, 100) == set(range(1, max_span(100) + 1, 2))
    t = PartitionOffsets(CommitPosition(0, "lw1:b:0:AQ"), 20)
    assert t.finished_beyond_count == 0  # restored offsets beyond the span are dropped
    t.fetched(list(range(5)))
    assert t.dispatch_limit == 0
    t.finished([0])
    assert t.dispatch_limit == 1


def test_version_changes_only_with_the_position() -> None:
    t = PartitionOffsets(CommitPosition(0), DEFAULT)
    v0 = t.version
    t.fetched(list(range(10)))
    assert t.version == v0  # commit point still 0, nothing finished
    first = t.position()
    t.finished([3])
    assert t.version != v0
    second = t.position()
    assert second != first
    assert t.position() is second  # cached until the next change
    t.fetched(list(range(10, 20)))
    assert t.position() is second


def test_foreign_metadata_is_replaced() -> None:
    t = PartitionOffsets(CommitPosition(7, "written by another tool"), DEFAULT)
    assert t.finished_beyond_count == 0
    assert t.position() == CommitPosition(7, "")
    t.fetched([7, 8])
    t.finished([7])
    assert t.position() == CommitPosition(8, "")


class TrackerMachine(RuleBasedStateMachine):
    """Random fetches, finishes and restarts, checked against a plain-set model."""

    def __init__(self) -> None:
        super().__init__()
        self.max_bytes = DEFAULT
        self.span = SPAN
        self.tracker = PartitionOffsets(CommitPosition(0), DEFAULT)
        self.next = 0  # offsets below are replays
        self.restored: set[int] = set()  # finished before the restart, not fetched since
        self.outstanding: set[int] = set()
        self.finished: set[int] = set()

    @rule(max_bytes=st.sampled_from([DEFAULT, 40, 60, 200]))
    def restart(self, max_bytes: int) -> None:
        position = self.tracker.position()
        assert position is not None
        assert len(position.metadata) <= self.max_bytes
        commit = position.offset
        kept = commit + min(self.span, max_span(max_bytes))  # what was written, then read back
        self.restored = {o for o in self.finished | self.restored if commit < o <= kept}
        self.max_bytes, self.span = max_bytes, max_span(max_bytes)
        self.next, self.outstanding, self.finished = commit, set(), set()
        self.tracker = PartitionOffsets(position, max_bytes)

    @rule(
        start=st.one_of(st.integers(-5, 10), st.just(6000)),
        steps=st.lists(st.sampled_from([1, 1, 1, 1, 2, 3, 50]), min_size=1, max_size=60),
    )
    def fetch(self, start: int, steps: list[int]) -> None:
        offsets = [max(0, self.next + start)]
        for step in steps:
            offsets.append(offsets[-1] + step)
        expected_skip = set()
        for offset in offsets:
            if offset < self.next:
                expected_skip.add(offset)
                continue
            self.restored = {r for r in self.restored if r >= offset}
            if offset in self.restored:
                self.restored.discard(offset)
                self.finished.add(offset)
                expected_skip.add(offset)
            else:
                self.outstanding.add(offset)
            self.next = offset + 1
        assert self.tracker.fetched(offsets) == expected_skip

    @precondition(lambda self: self.outstanding)
    @rule(data=st.data(), within_limit=st.booleans())
    def finish(self, data: st.DataObject, within_limit: bool) -> None:
        candidates = sorted(self.outstanding)
        if within_limit:
            candidates = [o for o in candidates if o <= self.tracker.dispatch_limit]
        chosen = data.draw(st.lists(st.sampled_from(candidates), max_size=40)) if candidates else []
        self.tracker.finished(chosen)
        self.outstanding -= set(chosen)
        self.finished |= set(chosen)

    @precondition(lambda self: self.finished)
    @rule(data=st.data())
    def finish_again(self, data: st.DataObject) -> None:
        self.tracker.finished([data.draw(st.sampled_from(sorted(self.finished)))])

    @rule(back=st.integers(1, 60))
    def finish_a_gap_or_a_committed_offset(self, back: int) -> None:
        offset = self.next - back
        if offset >= 0 and offset not in self.outstanding:
            self.tracker.finished([offset])  # never fetched, or finished: nothing to do

    @rule(ahead=st.integers(0, 5))
    def finish_unfetched(self, ahead: int) -> None:
        # Beyond the commit point too: restored offsets (finished before a restart) can
        # carry it past ``next``, and finishing a committed offset is a no-op.
        with pytest.raises(ValueError):
            self.tracker.finished([max(self.next, self.model_commit()) + ahead])

    def model_commit(self) -> int:
        if self.outstanding:
            return min(self.outstanding)
        commit = self.next
        while commit in self.restored:
            commit += 1
        return commit

    @invariant()
    def agrees_with_the_model(self) -> None:
        commit = self.model_commit()
        beyond = {o for o in self.finished | self.restored if o > commit}
        assert self.tracker.commit_offset == commit
        assert self.tracker.dispatch_limit == commit + self.span
        assert self.tracker.outstanding == len(self.outstanding)
        assert self.tracker.finished_beyond_count == len(beyond)
        position = self.tracker.position()
        assert position is not None
        assert position.offset == commit
        assert finished_in(position, self.max_bytes) == {
            o for o in beyond if o <= commit + self.span
        }
        assert len(position.metadata) <= self.max_bytes


TrackerMachine.TestCase.settings = settings(max_examples=300, stateful_step_count=40, deadline=None)
test_tracker_agrees_with_a_model = TrackerMachine.TestCase
