"""State restores as metrics: how many partitions restore, and each one's records left,
back to 0 once its restore ended (a last value would stay otherwise); and how many
partitions' state is not durable."""

from __future__ import annotations

from metrics_recorder import Recorder

from laneway.control.backlog import Backlog
from laneway.control.tally import Tally
from laneway.metrics import Metric
from laneway.state.keeper import StateFigures
from laneway.types import NotDurable, Restore

RESTORING = (Metric.STATE_RESTORING, ())


def left(partition: int) -> tuple[Metric, tuple[str, ...]]:
    return (Metric.STATE_RESTORE_REMAINING, ("orders", str(partition)))


def test_restores_are_counted_with_their_records_left_and_zero_once_done() -> None:
    metrics = Recorder()
    tally = Tally(metrics)

    def sample(*restoring: Restore) -> None:
        tally.sample(0, 0, 0, {}, 0, {}, {}, Backlog(), {}, (), StateFigures(restoring, ()))

    sample(
        Restore("orders", 0, 400, 1_000, True, 1.5),
        Restore("orders", 3, 0, 0, False, 0.0),  # its span not measured yet
    )
    assert metrics.gauges[RESTORING] == 2
    assert metrics.gauges[left(0)] == 600
    assert metrics.gauges[left(3)] == 0
    sample(Restore("orders", 0, 900, 1_000, True, 2.5))
    assert metrics.gauges[RESTORING] == 1
    assert metrics.gauges[left(0)] == 100
    sample()
    assert metrics.gauges[RESTORING] == 0
    assert metrics.gauges[left(0)] == 0


def test_without_a_store_the_count_is_zero_and_no_partition_is_shown() -> None:
    metrics = Recorder()
    Tally(metrics).sample(0, 0, 0, {}, 0, {}, {}, Backlog(), {})
    assert metrics.gauges[RESTORING] == 0
    assert not [labels for metric, labels in metrics.gauges if metric is left(0)[0]]


def test_partitions_whose_state_is_not_durable_are_counted() -> None:
    metrics = Recorder()
    tally = Tally(metrics)
    failing = NotDurable("orders", 2, "orders.state", 31.0, "not acknowledged in 10 s")
    tally.sample(0, 0, 0, {}, 0, {}, {}, Backlog(), {}, (), StateFigures((), (failing,)))
    assert metrics.gauges[(Metric.STATE_NOT_DURABLE, ())] == 1
    tally.sample(0, 0, 0, {}, 0, {}, {}, Backlog(), {}, (), StateFigures((), ()))
    assert metrics.gauges[(Metric.STATE_NOT_DURABLE, ())] == 0
