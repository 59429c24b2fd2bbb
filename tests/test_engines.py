"""Thread, async and sync engines driven directly: order, concurrency bound, cancel, errors."""

from __future__ import annotations

import asyncio
import threading
import time
from collections import defaultdict
from collections.abc import Callable

import pytest
from engine_runs import collect

from laneway.engines.async_engine import AsyncEngine
from laneway.engines.base import Completions, Engine
from laneway.engines.invoker import Invoker
from laneway.engines.sync import SyncEngine
from laneway.engines.thread import ThreadEngine
from laneway.options import Ordering
from laneway.retry import RetryPolicy
from laneway.types import Failure, Message

ONCE = RetryPolicy(max_retries=0)


def workload(count: int, keys: int = 20, partitions: int = 4) -> list[Message]:
    offsets = [0] * partitions
    out = []
    for i in range(count):
        key = i % keys
        p = key % partitions
        out.append(Message("t", p, offsets[p], f"k{key}".encode(), str(i).encode()))
        offsets[p] += 1
    return out


class Recorder:
    """Records start/end of every handler call and the peak number running at once."""

    def __init__(self, delay: float = 0.0) -> None:
        self.delay = delay
        self.lock = threading.Lock()
        self.running = 0
        self.peak = 0
        self.order: dict[object, list[int]] = defaultdict(list)
        self.overlap_in_lane = False
        self.active: set[object] = set()

    def enter(self, m: Message, lane: object) -> None:
        with self.lock:
            self.running += 1
            self.peak = max(self.peak, self.running)
            if lane in self.active:
                self.overlap_in_lane = True
            self.active.add(lane)
            self.order[lane].append(m.offset)

    def leave(self, lane: object) -> None:
        with self.lock:
            self.running -= 1
            self.active.discard(lane)


def lane_of(ordering: Ordering) -> Callable[[Message], object]:
    if ordering is Ordering.KEY:
        return lambda m: (m.partition, m.key)
    if ordering is Ordering.PARTITION:
        return lambda m: m.partition
    return lambda m: (m.partition, m.offset)


def make_engine(kind: str, ordering: Ordering, rec: Recorder, concurrency: int) -> Engine:
    lane = lane_of(ordering)
    if kind == "async":

        async def handle_async(m: Message) -> None:
            rec.enter(m, lane(m))
            await asyncio.sleep(rec.delay)
            rec.leave(lane(m))

        return AsyncEngine(Invoker(handle_async, ONCE, is_async=True), ordering, concurrency)

    def handle(m: Message) -> None:
        rec.enter(m, lane(m))
        time.sleep(rec.delay)
        rec.leave(lane(m))

    if kind == "sync":
        return SyncEngine(Invoker(handle, ONCE), threading.Event())
    return ThreadEngine(Invoker(handle, ONCE), ordering, concurrency)


@pytest.mark.parametrize("kind", ["thread", "async"])
@pytest.mark.parametrize("ordering", list(Ordering))
def test_every_message_once_in_lane_order_within_concurrency(kind: str, ordering: Ordering) -> None:
    rec = Recorder(delay=0.0005)
    engine = make_engine(kind, ordering, rec, concurrency=8)
    completions = Completions()
    engine.start(completions)
    batch = workload(2_000)
    for i in range(0, len(batch), 300):
        engine.submit(batch[i : i + 300])
    done = collect(completions, len(batch))
    engine.close(5.0)
    assert sorted((m.partition, m.offset) for m in done) == sorted(
        (m.partition, m.offset) for m in batch
    )
    assert rec.peak <= 8
    assert rec.peak >= 2, "work should overlap"
    if ordering is not Ordering.UNORDERED:
        assert not rec.overlap_in_lane
        for offsets in rec.order.values():
            assert offsets == sorted(offsets)


@pytest.mark.parametrize("kind", ["thread", "async"])
def test_a_slow_key_does_not_hold_up_the_others(kind: str) -> None:
    gate = threading.Event()
    finished_while_slow: list[Message] = []
    slow = Message("t", 0, 0, b"slow", b"")
    fast = [Message("t", 0, i + 1, f"k{i}".encode(), b"") for i in range(50)]
    if kind == "async":

        async def handle_async(m: Message) -> None:
            if m.key == b"slow":
                while not gate.is_set():
                    await asyncio.sleep(0.01)

        engine: Engine = AsyncEngine(Invoker(handle_async, ONCE, is_async=True), Ordering.KEY, 4)
    else:

        def handle(m: Message) -> None:
            if m.key == b"slow":
                gate.wait(10)

        engine = ThreadEngine(Invoker(handle, ONCE), Ordering.KEY, 4)
    completions = Completions()
    engine.start(completions)
    engine.submit([slow, *fast])
    finished_while_slow = collect(completions, len(fast), timeout=10)
    assert {m.offset for m in finished_while_slow} == {m.offset for m in fast}
    gate.set()
    assert collect(completions, 1)[0].key == b"slow"
    engine.close(5.0)


@pytest.mark.parametrize("kind", ["thread", "async"])
def test_finished_messages_are_reported_while_their_run_goes_on(kind: str) -> None:
    # One lane: one worker claims the whole run. Message 5 outlasts REPORT_EVERY and
    # message 10 blocks until the gate opens; 0..5 must be reported before that, so the
    # control plane can free buffer room and commit them while the lane is still busy.
    gate = threading.Event()

    def pace(m: Message) -> float:
        return 0.02 if m.offset == 5 else 0.0

    engine: Engine
    if kind == "async":

        async def handle_async(m: Message) -> None:
            await asyncio.sleep(pace(m))
            if m.offset == 10:
                while not gate.is_set():
                    await asyncio.sleep(0.01)

        engine = AsyncEngine(Invoker(handle_async, ONCE, is_async=True), Ordering.KEY, 4)
    else:

        def handle(m: Message) -> None:
            time.sleep(pace(m))
            if m.offset == 10:
                gate.wait(10)

        engine = ThreadEngine(Invoker(handle, ONCE), Ordering.KEY, 4)
    completions = Completions()
    engine.start(completions)
    engine.submit([Message("t", 0, i, b"k", b"") for i in range(20)])
    early = collect(completions, 6, timeout=10)
    assert engine.in_flight == 1, "the run should still be blocked at offset 10"
    gate.set()
    rest = collect(completions, 20 - len(early))
    engine.close(5.0)
    assert [m.offset for m in early][:6] == [0, 1, 2, 3, 4, 5]
    assert len(early) <= 10
    assert sorted(m.offset for m in early + rest) == list(range(20))


@pytest.mark.parametrize("kind", ["thread", "async"])
def test_cancel_returns_queued_and_unstarted_messages_of_a_partition(kind: str) -> None:
    rec = Recorder(delay=0.01)
    engine = make_engine(kind, Ordering.PARTITION, rec, concurrency=2)
    completions = Completions()
    engine.start(completions)
    batch = workload(400, keys=4, partitions=2)
    engine.submit(batch)
    time.sleep(0.1)
    dropped = engine.cancel([("t", 0)])
    done = collect(completions, 200 - len(dropped) + 200, timeout=15)
    engine.close(5.0)
    assert dropped and all(m.partition == 0 for m in dropped)
    done_ids = {(m.partition, m.offset) for m in done}
    dropped_ids = {(m.partition, m.offset) for m in dropped}
    assert not done_ids & dropped_ids, "a cancelled message also ran"
    assert done_ids | dropped_ids == {(m.partition, m.offset) for m in batch}


@pytest.mark.parametrize("kind", ["sync", "thread", "async"])
def test_a_raising_handler_is_reported_as_a_failure(kind: str) -> None:
    def boom(m: Message) -> None:
        if m.offset == 3:
            raise ValueError("bad amount")

    async def boom_async(m: Message) -> None:
        boom(m)

    engine: Engine
    if kind == "sync":
        engine = SyncEngine(Invoker(boom, ONCE), threading.Event())
    elif kind == "thread":
        engine = ThreadEngine(Invoker(boom, ONCE), Ordering.KEY, 2)
    else:
        engine = AsyncEngine(Invoker(boom_async, ONCE, is_async=True), Ordering.KEY, 2)
    completions = Completions()
    engine.start(completions)
    engine.submit([Message("t", 0, i, b"k", b"") for i in range(6)])
    finished: list[Message] = []
    failed: list[Failure] = []
    deadline = time.monotonic() + 10
    while len(finished) + len(failed) < 6 and time.monotonic() < deadline:
        completions.wait(0.05)
        more, bad = completions.take()
        finished += more
        failed += bad
    engine.close(1.0)
    assert [f.message.offset for f in failed] == [3]
    assert failed[0].error_type == "ValueError" and failed[0].error_message == "bad amount"
    assert sorted(m.offset for m in finished) == [0, 1, 2, 4, 5]


def test_close_is_bounded_with_a_stuck_handler() -> None:
    release = threading.Event()
    engine = ThreadEngine(Invoker(lambda m: release.wait(30), ONCE), Ordering.UNORDERED, 2)
    engine.start(Completions())
    engine.submit([Message("t", 0, i, None, b"") for i in range(4)])
    time.sleep(0.05)
    started = time.monotonic()
    engine.close(0.5)
    assert time.monotonic() - started < 2.0
    release.set()
