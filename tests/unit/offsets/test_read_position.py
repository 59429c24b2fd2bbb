"""PartitionOffsets.read_up_to: the source's read position moves the commit offset past
offsets that hold no record (transaction markers, aborted records, compaction), never past
a fetched offset that is not finished."""

from __future__ import annotations

from laneway.offsets.codec import encode
from laneway.offsets.tracker import PartitionOffsets
from laneway.types import CommitPosition

DEFAULT = 4096


def test_a_marker_after_the_last_record_is_committed_past() -> None:
    t = PartitionOffsets(CommitPosition(0), DEFAULT)
    t.fetched([0, 1, 2, 3, 4])  # offset 5: the transaction's commit marker
    t.finished(range(5))
    assert t.commit_offset == 5
    version = t.version
    t.read_up_to(6)
    assert t.version != version
    assert t.position() == CommitPosition(6, "")


def test_unfinished_work_keeps_the_commit_point_and_its_metadata() -> None:
    t = PartitionOffsets(CommitPosition(0), DEFAULT)
    t.fetched([0, 1, 2])
    t.finished([1, 2])
    t.read_up_to(10)
    assert t.position() == CommitPosition(0, encode(0, {1, 2}))
    t.finished([0])
    assert t.position() == CommitPosition(10, "")


def test_later_records_after_the_position_are_tracked_as_usual() -> None:
    t = PartitionOffsets(CommitPosition(0), DEFAULT)
    t.fetched([0, 1])
    t.finished([0, 1])
    t.read_up_to(5)  # 2..4: an aborted transaction and its marker
    assert t.fetched([5, 6]) == set()
    assert t.commit_offset == 5
    t.finished([5, 6])
    assert t.commit_offset == 7


def test_a_position_at_or_below_what_is_tracked_is_ignored() -> None:
    t = PartitionOffsets(CommitPosition(0), DEFAULT)
    t.fetched([0, 1, 2, 3])
    t.finished(range(4))
    version = t.version
    t.read_up_to(2)  # a seek moved the position back
    t.read_up_to(4)
    assert t.version == version
    assert t.commit_offset == 4


def test_nothing_moves_before_the_start_is_known() -> None:
    t = PartitionOffsets(None, DEFAULT)
    t.read_up_to(100)
    assert t.commit_offset is None
    assert t.fetched([3, 4]) == set()
    assert t.commit_offset == 3


def test_finished_offsets_restored_below_the_position_are_met_first() -> None:
    committed = CommitPosition(0, encode(0, {2, 3}))
    t = PartitionOffsets(committed, DEFAULT)
    t.read_up_to(10)  # claims at 2 and 3 are not passed over unseen
    assert t.commit_offset == 0
