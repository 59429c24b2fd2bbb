"""The true backlog: lag minus the offsets the commit metadata records as finished, with
nothing read from the group trusted past the log end."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from laneway.offsets.backlog import group_backlog, partition_backlog
from laneway.offsets.codec import encode
from laneway.types import CommitPosition


def test_finished_offsets_beyond_the_commit_come_off_the_lag() -> None:
    metadata = encode(100, [101, 102, 103, 110, 111])
    found = partition_backlog("orders", 0, CommitPosition(100, metadata), end=120)
    assert (found.committed, found.end, found.lag) == (100, 120, 20)
    assert (found.finished_beyond, found.backlog, found.finished_runs) == (5, 15, 2)


def test_finished_offsets_at_or_past_the_log_end_do_not_count() -> None:
    metadata = encode(10, [11, 12, 19, 20, 25])  # the end is 20: 20 and 25 are not written
    found = partition_backlog("orders", 0, CommitPosition(10, metadata), end=20)
    assert (found.lag, found.finished_beyond, found.backlog) == (10, 3, 7)


def test_metadata_laneway_did_not_write_counts_nothing() -> None:
    for metadata in ("", "written by another tool", "lw1:b:10:!!!", encode(9, [11])):
        found = partition_backlog("orders", 3, CommitPosition(10, metadata), end=50)
        assert (found.lag, found.finished_beyond, found.backlog) == (40, 0, 40), metadata


def test_a_partition_never_committed_counts_from_the_log_start() -> None:
    found = partition_backlog("orders", 1, None, end=70, start=30)
    assert (found.committed, found.lag, found.finished_beyond, found.backlog) == (None, 40, 0, 40)


def test_a_commit_past_the_end_is_no_lag_and_claims_nothing() -> None:
    found = partition_backlog("orders", 0, CommitPosition(90, encode(90, [95])), end=80)
    assert (found.lag, found.finished_beyond, found.backlog) == (0, 0, 0)


def test_the_group_totals_and_the_json_of_the_contract() -> None:
    committed = {
        ("orders", 0): CommitPosition(5, encode(5, [7, 8])),
        ("orders", 1): CommitPosition(9),
    }
    ends = {("orders", 0): 10, ("orders", 1): 9, ("payments", 0): 4}
    backlog = group_backlog(committed, ends, {("payments", 0): 1})
    assert backlog.as_json() == {
        "partitions": [
            {"topic": "orders", "partition": 0, "committed": 5, "end": 10, "lag": 5,
             "finished_beyond": 2, "backlog": 3},
            {"topic": "orders", "partition": 1, "committed": 9, "end": 9, "lag": 0,
             "finished_beyond": 0, "backlog": 0},
            {"topic": "payments", "partition": 0, "committed": None, "end": 4, "lag": 3,
             "finished_beyond": 0, "backlog": 3},
        ],
        "lag": 8,
        "backlog": 6,
    }  # fmt: skip


def test_partitions_without_a_known_end_are_left_out() -> None:
    backlog = group_backlog({}, {("orders", 0): 3}, partitions=[("orders", 0), ("orders", 1)])
    assert [(p.topic, p.partition) for p in backlog.partitions] == [("orders", 0)]


@given(
    commit=st.integers(min_value=0, max_value=10**12),
    gaps=st.lists(st.integers(min_value=1, max_value=50), min_size=1, max_size=40),
    beyond=st.integers(min_value=-60, max_value=400),
)
def test_backlog_is_lag_minus_the_finished_offsets_below_the_end(
    commit: int, gaps: list[int], beyond: int
) -> None:
    finished, offset = [], commit
    for gap in gaps:
        offset += gap
        finished.append(offset)
    end = max(commit, finished[-1] + beyond)
    found = partition_backlog("t", 0, CommitPosition(commit, encode(commit, finished)), end)
    counted = sum(1 for o in finished if o < end)
    assert found.lag == end - commit
    assert found.finished_beyond == counted
    assert found.backlog == end - commit - counted >= 0
