"""StatusHistory: per partition the done rate, the backlog's trend and a time to clear from
the samples of the last seconds; counters' rates; a bounded span."""

from __future__ import annotations

from laneway.control.backlog import Backlog
from laneway.offsets.backlog import PartitionBacklog
from laneway.stats import ConsumerStats
from laneway.status.history import StatusHistory


class Feed:
    """What the history samples, set by the test before each sample."""

    def __init__(self) -> None:
        self.backlog = Backlog()
        self.stats = ConsumerStats()


def figures(*rows: tuple[int, int, int]) -> Backlog:
    """Partitions of ``orders`` as (partition, end, backlog)."""
    parts = tuple(
        PartitionBacklog("orders", n, end - backlog, end, backlog, 0, backlog)
        for n, end, backlog in rows
    )
    return Backlog(sum(p.backlog for p in parts), sum(p.lag for p in parts), 0.0, 0.0, parts)


def test_done_rate_trend_and_time_to_clear_per_partition() -> None:
    feed = Feed()
    history = StatusHistory(lambda: feed.backlog, lambda: feed.stats)
    # Partition 0: 100 arrive and 50 finish a second (backlog grows 50/s);
    # partition 1: nothing arrives, 20 finish a second; partition 2 joins at the end.
    for second in range(6):
        feed.backlog = figures((0, 1000 + 100 * second, 200 + 50 * second),
                               (1, 500, 300 - 20 * second))  # fmt: skip
        if second == 5:
            feed.backlog = figures((0, 1500, 450), (1, 500, 200), (2, 10, 10))
        feed.stats = ConsumerStats(processed=70 * second, failed=second, dead_lettered=second)
        history.sample(clock=100.0 + second)
    trends = history.trends()
    assert round(trends[("orders", 0)].done_rate) == 50
    assert round(trends[("orders", 0)].trend) == 50
    assert round(trends[("orders", 0)].time_to_clear or 0) == 9  # 450 at 50/s
    assert round(trends[("orders", 1)].done_rate) == 20
    assert round(trends[("orders", 1)].trend) == -20
    assert trends[("orders", 1)].time_to_clear == 10.0
    assert trends[("orders", 2)].time_to_clear is None  # nothing finished there to go by
    assert history.rates() == {"processed": 70.0, "failed": 1.0, "dead_lettered": 1.0}
    assert history.partition_series()[("orders", 1)] == [300, 280, 260, 240, 220, 200]


def test_the_span_kept_is_bounded() -> None:
    feed = Feed()
    history = StatusHistory(lambda: feed.backlog, lambda: feed.stats, kept=10)
    for second in range(100):
        history.sample(clock=float(second))
    series = history.series()
    assert len(series["ago"]) == 10 and series["ago"][0] == 9.0 and series["ago"][-1] == 0.0
