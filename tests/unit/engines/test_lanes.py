"""LaneScheduler: the pure ordering logic, checked against a model with hypothesis."""

from __future__ import annotations

from collections import deque

from hypothesis import given, settings
from hypothesis import strategies as st

from laneway.engines.lanes import LaneScheduler, steal, steal_half
from laneway.options import Ordering
from laneway.types import Message


def messages(keys: list[int], partitions: int = 2) -> list[Message]:
    offsets = [0] * partitions
    out = []
    for key in keys:
        p = key % partitions
        out.append(Message("t", p, offsets[p], str(key).encode(), b""))
        offsets[p] += 1
    return out


def test_a_busy_lane_is_not_handed_out_twice() -> None:
    s = LaneScheduler(Ordering.KEY, workers=4)
    s.add(messages([1, 1, 2]))
    first = s.claim()
    second = s.claim()
    assert first is not None and second is not None
    assert [m.key for m in first[1]] == [b"1", b"1"]
    assert [m.key for m in second[1]] == [b"2"]
    assert s.claim() is None
    s.add(messages([1]))
    assert s.claim() is None, "key 1 is still running: its new message must wait"
    s.release(first[0])
    third = s.claim()
    assert third is not None and third[1][0].key == b"1"


def test_partition_ordering_makes_one_lane_per_partition() -> None:
    s = LaneScheduler(Ordering.PARTITION, workers=4)
    s.add(messages([0, 1, 2, 3], partitions=2))
    claims = [s.claim(), s.claim(), s.claim()]
    assert claims[2] is None
    assert sorted(len(c[1]) for c in claims if c) == [2, 2]


def test_unordered_runs_are_a_fair_share() -> None:
    s = LaneScheduler(Ordering.UNORDERED, workers=4)
    s.add(messages(list(range(40))))
    claim = s.claim()
    assert claim is not None and len(claim[1]) == 10


def test_cancel_removes_only_queued_messages_of_the_partitions() -> None:
    s = LaneScheduler(Ordering.KEY, workers=2)
    s.add(messages([0, 1, 2, 3, 0, 1]))
    dropped = s.cancel({("t", 0)})
    assert {m.partition for m in dropped} == {0} and len(dropped) == 3
    assert s.queued == 3
    claim = s.claim()
    assert claim is not None and claim[1][0].partition == 1


def test_steal_takes_the_unstarted_tail_of_a_run() -> None:
    s = LaneScheduler(Ordering.KEY, workers=2)
    run = deque(messages([0, 0, 0]))
    run.popleft()
    assert len(steal(run, {("t", 0)}, s)) == 2 and not run
    other = deque(messages([1, 1]))
    assert steal(other, {("t", 0)}, s) == [] and len(other) == 2


@settings(max_examples=200, deadline=None)
@given(
    ordering=st.sampled_from(list(Ordering)),
    keys=st.lists(st.integers(0, 6), min_size=1, max_size=80),
    workers=st.integers(1, 5),
    steps=st.lists(st.integers(0, 10), min_size=1, max_size=200),
)
def test_random_interleavings_keep_lane_order_and_lose_nothing(
    ordering: Ordering, keys: list[int], workers: int, steps: list[int]
) -> None:
    s = LaneScheduler(ordering, workers=workers, max_run=3)
    produced = messages(keys)
    s.add(produced[: len(produced) // 2])
    pending = produced[len(produced) // 2 :]
    running: list[tuple[object, list[Message]]] = []
    done: list[Message] = []
    lane_running: set[object] = set()
    for step in [*steps, *([0] * 400)]:
        if step < 4 and running:
            lane, run = running.pop(step % len(running))
            done.extend(run)
            lane_running.discard(lane)
            s.release(lane)
        elif step < 8 and len(running) < workers and s.has_ready():
            claim = s.claim()
            assert claim is not None
            lane, run = claim
            if ordering is not Ordering.UNORDERED:
                assert lane not in lane_running, "a lane was handed out twice"
                lane_running.add(lane)
            running.append(claim)
        elif pending:
            s.add(pending[:5])
            pending = pending[5:]
        if not running and not pending and not s.has_ready():
            break
    assert sorted(done, key=lambda m: (m.partition, m.offset)) == sorted(
        produced, key=lambda m: (m.partition, m.offset)
    )
    if ordering is Ordering.UNORDERED:
        return
    lane = (lambda m: (m.partition, m.key)) if ordering is Ordering.KEY else (lambda m: m.partition)
    seen: dict[object, int] = {}
    for m in done:
        assert seen.get(lane(m), -1) < m.offset, "a lane ran out of offset order"
        seen[lane(m)] = m.offset


def test_steal_half_takes_the_tail_of_the_longest_run_in_order() -> None:
    short = deque(messages([0, 0]))
    long = deque(messages([1] * 7, partitions=1))
    stolen = steal_half([short, long])
    assert [m.offset for m in stolen] == [3, 4, 5, 6]
    assert [m.offset for m in long] == [0, 1, 2]
    assert steal_half([deque()]) == [] and steal_half([]) == []
