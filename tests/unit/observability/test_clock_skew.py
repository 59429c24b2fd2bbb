"""End-to-end latency is never negative: a timestamp ahead of this host's clock counts as
age 0 and as clock skew, whatever the batch size (sampled bucketing included)."""

from __future__ import annotations

import time

import pytest
from metrics_recorder import Recorder

from laneway.control.tally import Tally
from laneway.metrics import LATENCY_BUCKETS, SAMPLED_FROM, Distribution, Metric
from laneway.types import Message


@pytest.mark.parametrize("size", [3, SAMPLED_FROM * 4])
def test_ages_from_a_clock_ahead_are_zero_and_counted(size: int) -> None:
    now = 1_000_000.0
    stamps = [now - 2_000.0] * size + [now + 3_600_000.0] * size
    batch = Distribution.of_ages(now, stamps, LATENCY_BUCKETS)
    assert batch.count == 2 * size
    assert batch.total == pytest.approx(2.0 * size), "only the real ages add up"
    assert batch.clamped == size
    assert batch.cumulative[0] == size, "the skewed ones fall in the lowest bucket"
    assert batch.cumulative[-1] == 2 * size


def test_ages_without_skew_are_as_before() -> None:
    batch = Distribution.of_ages(10_000.0, [9_999, 9_990, 9_500, 9_000], (0.005, 0.1, 1.0))
    assert (batch.cumulative, batch.total, batch.count, batch.clamped) == ((1, 2, 4), 1.511, 4, 0)


def test_the_tally_reports_skew_per_topic_and_keeps_the_sum_positive() -> None:
    recorder = Recorder()
    tally = Tally(recorder)
    now_ms = int(time.time() * 1000)
    future = now_ms + 3_600_000
    messages = [
        Message("orders", 0, 0, b"k", b"v", timestamp=now_ms - 100),
        Message("orders", 0, 1, b"k", b"v", timestamp=future),
        Message("refunds", 0, 0, b"k", b"v", timestamp=future),
        Message("refunds", 0, 1, b"k", b"v", timestamp=future),
    ]
    tally.finished(messages, [], time.monotonic())
    assert recorder.counters[(Metric.CLOCK_SKEW, ("orders",))] == 1
    assert recorder.counters[(Metric.CLOCK_SKEW, ("refunds",))] == 2
    for topic in ("orders", "refunds"):
        [batch] = recorder.observed[(Metric.END_TO_END_LATENCY, (topic,))]
        assert 0 <= batch.total < 60


def test_no_skew_no_counter() -> None:
    recorder = Recorder()
    tally = Tally(recorder)
    message = Message("orders", 0, 0, b"k", b"v", timestamp=int(time.time() * 1000) - 5)
    tally.finished([message], [], time.monotonic())
    assert (Metric.CLOCK_SKEW, ("orders",)) not in recorder.counters
