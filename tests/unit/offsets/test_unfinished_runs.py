"""What a running consumer tells about a partition's commit point: the offset holding it
and the runs of finished offsets beyond it (the gaps between them are unfinished work)."""

from __future__ import annotations

from laneway.offsets.codec import encode_window
from laneway.offsets.offset_progress import OffsetProgress
from laneway.offsets.tracker import PartitionOffsets
from laneway.types import CommitPosition, Message, PartitionId

P: PartitionId = ("orders", 0)


def test_the_first_unfinished_offset_holds_the_commit_point() -> None:
    tracker = PartitionOffsets(None, 4096)
    assert tracker.first_unfinished is None  # the start is not known yet
    tracker.fetched(list(range(10, 30)))
    assert tracker.first_unfinished == 10
    tracker.finished([10, 11, 13])
    assert tracker.first_unfinished == 12
    tracker.finished(range(12, 30))
    assert tracker.first_unfinished is None  # all fetched work is done
    assert tracker.commit_offset == 30


def test_runs_of_finished_offsets_beyond_the_commit_point_are_counted() -> None:
    tracker = PartitionOffsets(None, 4096)
    tracker.fetched(list(range(100)))
    assert tracker.finished_runs == 0
    tracker.finished([5, 6, 7, 20, 40, 41])  # 0 unfinished: three runs beyond it
    assert tracker.finished_runs == 3
    tracker.finished(range(20))  # the commit point moves to 21: one run (40, 41) left
    assert tracker.commit_offset == 21
    assert tracker.finished_runs == 1


def test_runs_restored_from_the_commit_metadata_count_too() -> None:
    committed = CommitPosition(50, encode_window(50, b"\x01\x01\x00\x01"))  # 51, 52 and 54
    tracker = PartitionOffsets(committed, 4096)
    assert tracker.finished_runs == 2
    assert tracker.first_unfinished is None  # nothing fetched yet


def test_the_consumers_backlog_figures_carry_them() -> None:
    progress = OffsetProgress(committer=_NoCommits(), metadata_max_bytes=4096)
    progress.assign({P: CommitPosition(0, "")})
    messages = [Message("orders", 0, offset, b"k", b"v") for offset in range(10)]
    progress.accept(messages)
    progress.settle([messages[3], messages[4], messages[8]], [])
    [figures] = progress.backlog({P: 12}) or ()
    assert figures.first_unfinished == 0
    assert figures.finished_runs == 2
    assert figures.backlog == 12 - 3


class _NoCommits:
    def commit(self, positions: object) -> None:
        pass
