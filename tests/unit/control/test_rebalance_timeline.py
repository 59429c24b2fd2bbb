"""The rebalance timeline a consumer keeps for its status page: bounded, in order, each
change with its kind and partitions."""

from __future__ import annotations

from laneway.control.tally import Tally
from laneway.stats import REBALANCES_KEPT


def test_changes_are_kept_in_order_with_kind_and_partitions() -> None:
    tally = Tally()
    tally.rebalanced("assigned", {("orders", 1): None, ("orders", 0): None})
    tally.rebalanced("revoked", [("orders", 1)])
    tally.rebalanced("lost", [("orders", 0)])
    assert [(r.kind, r.partitions) for r in tally.timeline] == [
        ("assigned", (("orders", 0), ("orders", 1))),
        ("revoked", (("orders", 1),)),
        ("lost", (("orders", 0),)),
    ]
    times = [r.at for r in tally.timeline]
    assert times == sorted(times) and times[0] > 1e9  # wall-clock seconds
    assert tally.rebalances == 3


def test_the_timeline_is_bounded_and_the_count_is_not() -> None:
    tally = Tally()
    for n in range(REBALANCES_KEPT * 3):
        tally.rebalanced("assigned", [("orders", n)])
    assert len(tally.timeline) == REBALANCES_KEPT
    assert tally.timeline[0].partitions == (("orders", REBALANCES_KEPT * 2),)
    assert tally.rebalances == REBALANCES_KEPT * 3
