"""Claims of several lanes at once: sizing, giving unstarted lanes back, revocations."""

from __future__ import annotations

import asyncio
import random
import threading

from engine_runs import collect, started
from hypothesis import given, settings
from hypothesis import strategies as st

from laneway.engines.async_engine import AsyncEngine
from laneway.engines.claims import (
    GIVE_BACK_AFTER,
    Claim,
    HandlerCost,
    steal_claimed,
    take_back,
    take_back_slow,
)
from laneway.engines.invoker import Invoker
from laneway.engines.lanes import LaneScheduler
from laneway.options import Ordering
from laneway.retry import RetryPolicy
from laneway.types import Message


def keyed(*keys: str, partition: int = 0, first: int = 0) -> list[Message]:
    return [Message("t", partition, first + i, k.encode(), b"") for i, k in enumerate(keys)]


def keys_of(messages: list[Message]) -> list[str]:
    return [(m.key or b"").decode() for m in messages]


def test_a_claim_takes_ready_lanes_until_it_holds_enough_messages() -> None:
    s = LaneScheduler(Ordering.KEY, workers=2)
    s.add(keyed("a", "a", "a", "b", "c", "d"))
    claimed = s.claim_lanes(4)
    assert [keys_of(run) for _, run in claimed] == [["a", "a", "a"], ["b"]]
    assert [keys_of(run) for _, run in s.claim_lanes(1)] == [["c"]]
    assert [keys_of(run) for _, run in s.claim_lanes(100)] == [["d"]]
    assert s.claim_lanes(100) == [] and s.queued == 0


def test_an_unordered_claim_is_one_fair_share() -> None:
    s = LaneScheduler(Ordering.UNORDERED, workers=4)
    s.add(keyed(*"abcdefgh"))
    [(_, run)] = s.claim_lanes(100)
    assert len(run) == 2


def test_claims_take_one_lane_until_the_cost_is_measured_then_about_a_millisecond() -> None:
    cost = HandlerCost(max_run=256)
    assert cost.claim_size() == 1 and cost.low is None
    cost.record(0.000_256, 256)  # 1 us a message
    assert cost.claim_size() == 256  # 1,000 would fit: max_run bounds it
    for _ in range(4):
        cost.record(0.000_100, 1)  # 100 us a message
    assert cost.claim_size() == 10


def test_the_cost_is_the_lower_quartile_so_a_few_slow_claims_do_not_shrink_claims() -> None:
    cost = HandlerCost(max_run=256)
    for _ in range(12):
        cost.record(0.000_010, 100)  # 0.1 us a message
    for _ in range(4):
        cost.record(0.1, 1)  # preempted, or one slow message
    assert cost.low is not None and cost.low < 0.000_001 and cost.claim_size() == 256
    for _ in range(12):
        cost.record(0.01, 1)  # most claims are slow now
    assert cost.claim_size() == 1


def test_blocking_handlers_take_one_lane_at_a_time() -> None:
    cost = HandlerCost(max_run=256)
    cost.record(0.005, 1)
    assert cost.claim_size() == 1


def test_a_slow_claim_gives_back_its_unstarted_lanes_but_the_running_one() -> None:
    s = LaneScheduler(Ordering.KEY, workers=2)
    s.add(keyed("a", "a", "b", "c", "c"))
    claim = Claim(s.claim_lanes(100), 0.0)
    assert len(claim.lanes) == 3
    running = claim.run.popleft()  # the thread is running a0
    s.add(keyed("c", "b", first=5))  # arrived meanwhile
    assert take_back(claim, s) == 4
    assert claim.lanes == [s.lane(running)] and claim.ran() == 1
    taken = [keys_of(run) for _, run in s.claim_lanes(100)]
    assert taken == [["b", "b"], ["c", "c", "c"]], "given back ahead of later messages"
    assert [m.offset for _, run in s.claim_lanes(100) for m in run] == []  # a: still busy
    s.release_all(claim.lanes)
    [(lane, rest)] = s.claim_lanes(100)
    assert lane == s.lane(running) and [m.offset for m in rest] == [1]


def test_a_slow_claim_whose_messages_all_started_releases_its_finished_lanes() -> None:
    """Found by the claims model (hypothesis): a0 ran and finished, b0 then hung; a1,
    fetched meanwhile, waited in lane a, still held by the claim, behind b0's call."""
    s = LaneScheduler(Ordering.KEY, workers=2)
    s.add(keyed("a", "b"))
    claim = Claim(s.claim_lanes(100), 0.0)
    claim.run.popleft()  # a0 ran and finished
    s.add(keyed("a", first=2))
    running = claim.run.popleft()  # the thread is inside b0's call
    assert take_back_slow([claim], s, GIVE_BACK_AFTER) == 1
    assert claim.lanes == [s.lane(running)]
    [(_, run)] = s.claim_lanes(100)
    assert keys_of(run) == ["a"] and run[0].offset == 2


def test_a_claim_given_back_before_its_thread_started_keeps_no_lane() -> None:
    s = LaneScheduler(Ordering.KEY, workers=2)
    s.add(keyed("a", "b"))
    claim = Claim(s.claim_lanes(100), 0.0)
    assert take_back(claim, s) == 2 and claim.lanes == []
    assert sorted(keys_of([m for _, run in s.claim_lanes(100) for m in run])) == ["a", "b"]


def test_a_revocation_takes_its_partitions_out_of_a_claim_and_puts_the_rest_back() -> None:
    s = LaneScheduler(Ordering.KEY, workers=2)
    s.add([*keyed("a", "b"), *keyed("c", "d", partition=1)])
    claim = Claim(s.claim_lanes(100), 0.0)
    claim.run.popleft()  # running a
    revoked = steal_claimed([claim], {("t", 0)}, s)
    assert keys_of(revoked) == ["b"] and not claim.run
    assert s.claim_lanes(100) == [], "the lanes stay the claim's until it ends"
    s.release_all(claim.lanes)
    assert sorted(keys_of([m for _, run in s.claim_lanes(100) for m in run])) == ["c", "d"]


def test_a_revocation_takes_from_every_claim_and_puts_back_only_what_it_keeps() -> None:
    s = LaneScheduler(Ordering.KEY, workers=2)
    s.add([*keyed("a", "b"), *keyed("c", "d", partition=1)])
    first = Claim(s.claim_lanes(1), 0.0)  # lane a
    second = Claim(s.claim_lanes(100), 0.0)  # lanes b, c, d
    revoked = steal_claimed([first, second], {("t", 0)}, s)
    assert sorted(keys_of(revoked)) == ["a", "b"]
    assert not first.run and not second.run and s.queued == 2
    s.release_all(first.lanes)
    s.release_all(second.lanes)
    assert sorted(keys_of([m for _, run in s.claim_lanes(100) for m in run])) == ["c", "d"]


def test_a_revocation_leaves_a_one_lane_claim_of_another_partition_alone() -> None:
    s = LaneScheduler(Ordering.KEY, workers=2)
    s.add(keyed("a", "a", partition=1))
    claim = Claim(s.claim_lanes(1), 0.0)
    assert steal_claimed([claim], {("t", 0)}, s) == [] and len(claim.run) == 2


@settings(max_examples=300, deadline=None)
@given(
    ordering=st.sampled_from([Ordering.KEY, Ordering.PARTITION]),
    keys=st.lists(st.integers(0, 6), min_size=1, max_size=60),
    seed=st.integers(0, 2**32 - 1),
)
def test_claims_given_back_at_random_keep_lane_order_and_lose_nothing(
    ordering: Ordering, keys: list[int], seed: int
) -> None:
    """Three threads claim, start and finish messages one by one; claims are given back at
    random moments. No two messages of a lane run at once, a lane runs in offset order,
    and every message runs exactly once."""
    s = LaneScheduler(ordering, workers=3, max_run=2)
    produced = [Message("t", k % 2, i, str(k).encode(), b"") for i, k in enumerate(keys)]
    s.add(produced[: len(produced) // 2])
    pending = produced[len(produced) // 2 :]
    claims: list[Claim | None] = [None, None, None]
    in_hand: list[Message | None] = [None, None, None]
    started: list[Message] = []
    last_offset: dict[object, int] = {}
    chance = random.Random(seed)
    for turn in range(2_000):
        thread = chance.randrange(3)
        action = chance.randrange(6) if turn < 300 else chance.choice((0, 1, 2, 4))
        claim = claims[thread]
        if action == 0 and claim is None:
            claimed = s.claim_lanes(chance.randint(1, 4))
            claims[thread] = Claim(claimed, 0.0) if claimed else None
        elif action == 1 and claim is not None and in_hand[thread] is None:
            if claim.run:
                message = in_hand[thread] = claim.run.popleft()
                lane = s.lane(message)
                others = [m for i, m in enumerate(in_hand) if i != thread and m is not None]
                assert lane not in {s.lane(m) for m in others}, "a lane ran twice at once"
                assert last_offset.get(lane, -1) < message.offset, "a lane ran out of order"
                last_offset[lane] = message.offset
                started.append(message)
            else:
                s.release_all(claim.lanes)
                claims[thread] = None
        elif action == 2:
            in_hand[thread] = None
        elif action == 3 and claim is not None and len(claim.lanes) > 1:
            take_back(claim, s)
        elif action >= 4 and pending:
            s.add(pending[:3])
            pending = pending[3:]
    assert not pending and all(c is None for c in claims) and s.queued == 0
    assert sorted(started, key=lambda m: m.offset) == produced


def test_a_slow_key_does_not_hold_up_the_others_in_a_claim_of_the_async_engine() -> None:
    """Once handlers are known to be quick a coroutine claims many lanes at once; the one
    whose message turns out slow gives the rest back, and other coroutines run them."""
    released = threading.Event()

    async def handle(message: Message) -> None:
        if message.key == b"slow":
            for _ in range(1_000):  # at most 10 s
                if released.is_set():
                    return
                await asyncio.sleep(0.01)

    engine = AsyncEngine(
        Invoker(handle, RetryPolicy(max_retries=0), is_async=True), Ordering.KEY, 8
    )
    try:
        with started(engine) as completions:
            warm = [Message("t", 0, i, f"k{i % 50}".encode(), b"") for i in range(2_000)]
            engine.submit(warm)
            assert len(collect(completions, len(warm))) == len(warm)
            slow = Message("t", 1, 0, b"slow", b"")
            fast = [Message("t", 1, i + 1, f"k{i}".encode(), b"") for i in range(50)]
            engine.submit([slow, *fast])
            finished = collect(completions, len(fast), timeout=5)
            assert {m.offset for m in finished} == {m.offset for m in fast}
            released.set()
            assert [m.key for m in collect(completions, 1)] == [b"slow"]
    finally:
        released.set()
