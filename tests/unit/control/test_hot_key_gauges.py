"""The hot keys as metrics: ten ranks, each a count and an id, never the key itself."""

from __future__ import annotations

from metrics_recorder import Recorder

from laneway.control.backlog import Backlog
from laneway.control.tally import HOT_RANKS, Tally, key_id
from laneway.metrics import Metric
from laneway.types import HotKey


def test_hot_keys_are_gauges_by_rank_with_an_id_and_zero_past_the_last() -> None:
    metrics = Recorder()
    tally = Tally(metrics)
    hot = [HotKey("orders", 0, b"alice", 90, True), HotKey("orders", 1, None, 12)]
    tally.sample(0, 0, 0, {}, 0, {}, {}, Backlog(), {}, hot)
    gauges = metrics.gauges
    assert gauges[(Metric.HOT_KEY_MESSAGES, ("1",))] == 90
    assert gauges[(Metric.HOT_KEY_ID, ("1",))] == key_id(b"alice")
    assert gauges[(Metric.HOT_KEY_MESSAGES, ("2",))] == 12
    assert gauges[(Metric.HOT_KEY_ID, ("2",))] == key_id(None) != key_id(b"alice")
    assert all(gauges[(Metric.HOT_KEY_MESSAGES, (str(r),))] == 0 for r in range(3, HOT_RANKS + 1))
    assert 0 < key_id(b"alice") < 2**48
    assert not any("alice" in str(labels) for _, labels in gauges)
