"""The one drain estimate (``GET /backlog``, ``laneway_drain_seconds``, ``laneway top``):
the backlog over the rate of finished messages in the last 30 s of work."""

from __future__ import annotations

from laneway.control.backlog import BacklogWatch
from laneway.offsets.backlog import RATE_WINDOW, FinishingRate, PartitionBacklog, drain_seconds


def lagging(backlog: int) -> tuple[PartitionBacklog, ...]:
    return (PartitionBacklog("orders", 0, 0, backlog, backlog, 0, backlog),)


def test_after_an_idle_spell_the_rate_is_the_bursts_not_spread_over_idle_seconds() -> None:
    rate = FinishingRate()
    for second in range(25):  # idle: nothing left, nothing finishing
        rate.sample(float(second), 0, 0)
    # a burst of 5,000 arrives; 400 a second are worked off
    for second in range(25, 31):
        found, span = rate.sample(float(second), 400 * (second - 24), 5_000 - 400 * (second - 24))
    assert (found, span) == (400.0, 6.0)
    assert drain_seconds(5_000 - 2_400, found, span) == 6.5


def test_the_member_and_top_give_the_same_drain_for_the_same_samples() -> None:
    watch, rate = BacklogWatch(), FinishingRate()
    for second in range(40):
        finished = 0 if second < 20 else 300 * (second - 19)
        backlog = 0 if second < 20 else 9_000 - finished
        member = watch.sample(float(second), finished, lagging(backlog))
        group_rate, span = rate.sample(float(second), finished, backlog)
    assert member.rate == group_rate == 300.0
    assert member.drain_seconds == drain_seconds(backlog, group_rate, span) == backlog / 300


def test_busy_time_keeps_the_whole_window() -> None:
    rate = FinishingRate()
    for second in range(61):
        found, span = rate.sample(float(second), 100 * second, 6_000)
    assert (found, span) == (100.0, RATE_WINDOW)
    found, _ = rate.sample(61.0, 6_000 + 3_000, 6_000)  # a burst counts for its share
    assert found == (9_000 - 100 * 31) / RATE_WINDOW
