"""The limits' logic: the token bucket, the adaptive limit and the gates (no broker)."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable

import pytest

from laneway.engines.admission.adaptive import BACKOFF, INITIAL, MIN_WINDOW, AdaptiveLimit
from laneway.engines.admission.gate import AsyncGate, Limits, ThreadGate, gate_for
from laneway.engines.admission.rate import TokenBucket


def test_a_bucket_allows_its_burst_then_spaces_starts_by_the_rate() -> None:
    bucket = TokenBucket(100.0)  # burst: 5 tokens (a twentieth of a second)
    waits = [bucket.reserve(10.0) for _ in range(8)]
    assert waits[:5] == [0.0] * 5
    assert waits[5:] == pytest.approx([0.01, 0.02, 0.03])


def test_a_bucket_books_in_call_order_and_refills_while_idle() -> None:
    bucket = TokenBucket(10.0)  # burst: 1 token
    assert bucket.reserve(0.0) == 0.0
    assert bucket.reserve(0.0) == pytest.approx(0.1)
    assert bucket.reserve(0.05) == pytest.approx(0.15)  # booked after the one before
    assert bucket.reserve(5.0) == 0.0  # idle long: no debt, no banked flood either
    assert bucket.reserve(5.0) == pytest.approx(0.1)


def test_a_bucket_never_exceeds_its_rate_over_a_long_run() -> None:
    bucket = TokenBucket(250.0)
    now, starts = 0.0, []
    for _ in range(2_000):  # callers that start as soon as they are allowed
        now += bucket.reserve(now)
        starts.append(now)
    span = starts[-1] - starts[0]
    assert (len(starts) - bucket.rate * 0.05) / span <= 250.0 + 1e-6


Latency = Callable[[int], float]
"""A simulated downstream: the latency of a call with ``n`` calls in flight."""


def parallel(seconds: float) -> Latency:
    """A downstream with room for everyone: every call takes ``seconds``."""
    return lambda n: seconds


def serial(seconds: float) -> Latency:
    """A downstream that serves one call at a time (a hot row, a lock): with ``n`` in
    flight each waits for the others, ``n * seconds`` in all."""
    return lambda n: n * seconds


def run(limit: AdaptiveLimit, latency: Latency, windows: int, busy: bool = True) -> list[int]:
    """Feed ``windows`` windows of completions with every admitted call in flight (or
    only two, when not ``busy``); the limit after each."""
    seen = []
    for _ in range(windows):
        for _ in range(max(MIN_WINDOW, limit.admits)):
            running = limit.admits if busy else min(2, limit.admits)
            limit.sample(latency(running), False, running)
        seen.append(limit.admits)
    return seen


def test_the_limit_grows_while_latency_holds_and_the_limit_is_used() -> None:
    limit = AdaptiveLimit(256)
    assert limit.admits == INITIAL == 1
    grown = run(limit, parallel(0.005), 12)
    assert grown[:8] == [2, 4, 8, 16, 32, 64, 128, 256]  # slow start: doubling per round
    assert grown[-1] == 256  # bounded by concurrency


def test_an_unused_limit_does_not_grow() -> None:
    limit = AdaptiveLimit(256)
    # 2 calls in flight: it doubles while they fill half of it (1, 2, 4), then stops
    assert run(limit, parallel(0.005), 40, busy=False)[-1] == 8


def test_a_downstream_that_queues_keeps_the_limit_near_its_knee() -> None:
    limit = AdaptiveLimit(256)
    run(limit, parallel(0.005), 40)
    assert limit.admits == 256
    quickly = run(limit, serial(0.010), 10)
    assert quickly[-1] <= 4  # halved round after round: 256 calls would wait 2.56 s
    later = run(limit, serial(0.010), 200)
    # It grows only while latency is within twice the no-load 10 ms (2 calls in flight);
    # one round of growth (+ sqrt) can overshoot that before the next window cuts it.
    assert max(later) <= 4  # a queueing downstream cannot talk the limit back up
    assert limit.baseline is not None and limit.baseline <= 0.010 * 1.01


def test_a_downstream_that_got_slower_but_not_busier_gets_the_limit_back() -> None:
    limit = AdaptiveLimit(128)
    run(limit, parallel(0.005), 30)
    dip = run(limit, parallel(0.050), 80)  # ten times slower for everyone, no queue
    assert min(dip) <= 2  # backed off first: it looked like queueing
    assert dip[-1] == 128  # learnt the new no-load latency and grew back


def test_the_limit_recovers_once_the_queue_is_gone() -> None:
    limit = AdaptiveLimit(128)
    run(limit, parallel(0.004), 30)
    low = run(limit, serial(0.010), 30)[-1]
    back = run(limit, parallel(0.004), 40)[-1]
    assert low <= 4 and back == 128


def test_a_failure_cuts_the_limit_once_per_window() -> None:
    limit = AdaptiveLimit(64)
    run(limit, parallel(0.005), 30)
    assert limit.admits == 64
    for _ in range(10):  # a burst of failures within one window: one cut
        limit.sample(0.5, True, 64)
    assert limit.admits == int(64 * BACKOFF)
    for _ in range(200):  # failures go on, window after window
        limit.sample(0.5, True, 64)
    assert limit.admits == 1  # never below one


def test_an_adaptive_limit_needs_a_maximum_of_at_least_one() -> None:
    with pytest.raises(ValueError, match="maximum"):
        AdaptiveLimit(0)


def test_limits_are_shared_among_process_workers() -> None:
    limits = Limits(max_rate=100.0, adaptive=False, concurrency=4)
    assert limits.shared_by(4).max_rate == 25.0
    assert not Limits(None, False, 8).active
    assert gate_for(Limits(None, False, 8), is_async=False) is None
    assert isinstance(gate_for(limits, is_async=True), AsyncGate)


def test_a_thread_gate_admits_no_more_handlers_than_the_limit() -> None:
    gate = ThreadGate(Limits(None, adaptive=True, concurrency=4))
    stop = threading.Event()
    inside, most = 0, 0
    lock = threading.Lock()

    def worker() -> None:
        nonlocal inside, most
        for _ in range(20):
            assert gate.enter(stop)
            with lock:
                inside += 1
                most = max(most, inside)
            time.sleep(0.001)
            with lock:
                inside -= 1
            gate.leave(0.001, False)

    threads = [threading.Thread(target=worker) for _ in range(48)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert 2 <= most <= 4  # 48 threads, at most the limit's 4 in their handler
    assert gate.limit == 4


def test_a_thread_waiting_at_the_gate_gives_up_when_stopped() -> None:
    gate = ThreadGate(Limits(None, adaptive=True, concurrency=1))
    stop = threading.Event()
    assert gate.enter(stop)  # the one place is taken
    results: list[bool] = []
    waiter = threading.Thread(target=lambda: results.append(gate.enter(stop)))
    waiter.start()
    time.sleep(0.1)
    assert waiter.is_alive()
    stop.set()
    waiter.join(2)
    assert results == [False]
    gate.leave(0.01, False)
    assert gate.enter(threading.Event())  # the place was given back, not leaked


def test_a_thread_gate_spaces_starts_by_max_rate() -> None:
    gate = ThreadGate(Limits(max_rate=200.0, adaptive=False, concurrency=8))
    stop = threading.Event()
    started = time.monotonic()
    for _ in range(41):  # burst 10, then 31 spaced 5 ms apart
        assert gate.enter(stop)
        gate.leave(0.0, False)
    assert time.monotonic() - started >= 31 * 0.005 * 0.95


def test_an_async_gate_is_first_come_first_served_and_survives_cancellation() -> None:
    async def scenario() -> list[int]:
        gate = AsyncGate(Limits(None, adaptive=True, concurrency=1))
        order: list[int] = []
        await gate.enter()  # holds the only place

        async def waiter(index: int) -> None:
            await gate.enter()
            order.append(index)
            gate.leave(0.001, False)

        tasks = [asyncio.create_task(waiter(i)) for i in range(4)]
        await asyncio.sleep(0.01)
        tasks[1].cancel()  # gives up while waiting: must not keep a place
        await asyncio.sleep(0.01)
        gate.leave(0.001, False)
        await asyncio.wait_for(asyncio.gather(*tasks, return_exceptions=True), 5)
        await asyncio.wait_for(gate.enter(), 1)  # nothing leaked
        return order

    assert asyncio.run(scenario()) == [0, 2, 3]
