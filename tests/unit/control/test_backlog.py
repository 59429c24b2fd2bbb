"""A consumer's backlog sample: the figures of ``laneway lag`` over its owned partitions (as
it knows them now), a completion rate over a window that shows a stall, a finite drain
time, and gauges that a sum over the group's members counts once per partition."""

from __future__ import annotations

import math
from collections.abc import Mapping

from metrics_recorder import Recorder

from laneway.config import ConsumerConfig
from laneway.control.backlog import RATE_WINDOW, Backlog, BacklogWatch
from laneway.control.tally import Tally
from laneway.metrics import Metric
from laneway.offsets.backlog import PartitionBacklog
from laneway.offsets.codec import encode_window
from laneway.offsets.offset_progress import OffsetProgress
from laneway.sources.share.acknowledgement import Acknowledgement
from laneway.sources.share.progress import ShareProgress
from laneway.types import CommitPosition, Message, PartitionId, Stall, Waiting

A: PartitionId = ("orders", 0)
B: PartitionId = ("orders", 1)
C: PartitionId = ("orders", 2)


class Committer:
    """Takes commits (the progress under test only needs somewhere to send them)."""

    def __init__(self) -> None:
        self.commits: list[Mapping[PartitionId, CommitPosition]] = []

    def commit(self, positions: Mapping[PartitionId, CommitPosition]) -> None:
        self.commits.append(dict(positions))


def held(commit: int, finished_beyond: int) -> CommitPosition:
    """Offset ``commit`` unfinished, the next ``finished_beyond`` offsets finished."""
    return CommitPosition(commit, encode_window(commit, b"\x01" * finished_beyond))


def owning(positions: Mapping[PartitionId, CommitPosition | None]) -> OffsetProgress:
    """The progress of a consumer just assigned ``positions``."""
    progress = OffsetProgress(Committer(), 4096)
    progress.assign(positions)
    return progress


def test_backlog_is_lag_minus_what_is_known_finished_beyond_the_commit_point() -> None:
    progress = owning({A: held(10, 7), B: CommitPosition(5, "")})
    found = BacklogWatch().sample(0.0, 0, progress.backlog({A: 20, B: 8}))
    assert (found.lag, found.backlog) == (10 + 3, 3 + 3)
    assert [(p.partition, p.lag, p.finished_beyond, p.backlog) for p in found.partitions] == [
        (0, 10, 7, 3),
        (1, 3, 0, 3),
    ]


def test_a_partition_without_a_known_end_or_start_is_left_out() -> None:
    progress = owning({A: held(10, 7), B: CommitPosition(5, ""), C: None})
    # B: no end known yet; C: never committed and not read yet, so it has no start.
    figures = progress.backlog({A: 20, C: 50})
    assert figures is not None and [p.partition for p in figures] == [0]


def test_what_finished_since_the_last_commit_counts_at_once() -> None:
    progress = owning({A: CommitPosition(30, ""), C: None})
    progress.accept([message(A, offset) for offset in range(30, 40)])
    progress.accept([message(C, offset) for offset in range(100, 110)])
    progress.settle([message(A, 31), message(A, 32), message(C, 100), message(C, 105)], [])
    figures = progress.backlog({A: 45, C: 110})
    assert figures is not None
    a, c = figures
    # A: committed at 30, nothing committed since; 31 and 32 are known finished now.
    assert (a.committed, a.lag, a.finished_beyond, a.backlog) == (30, 15, 2, 13)
    # C: never committed; it counts from where it would commit now (101), 105 finished.
    assert (c.committed, c.lag, c.finished_beyond, c.backlog) == (None, 9, 1, 8)
    progress.settle([message(A, 30)], [])
    progress.commit([A, C])
    a, c = progress.backlog({A: 45, C: 110}) or ()
    assert (a.committed, a.lag, a.backlog) == (33, 12, 12)
    assert (c.committed, c.lag, c.backlog) == (101, 9, 8)


class Acknowledger:
    """Takes a share group's acknowledgements (none are refused)."""

    def acknowledge(self, messages: list[Message], kind: Acknowledgement) -> None:
        pass

    def flush(self) -> bool:
        return False

    def refused(self) -> dict[str, int]:
        return {}


def test_a_progress_without_offsets_has_no_backlog() -> None:
    share = ShareProgress(Acknowledger(), ConsumerConfig())
    share.accept([message(A, 0)])
    assert share.backlog({A: 10}) is None


def lagging(backlog: int) -> tuple[PartitionBacklog, ...]:
    """One partition, committed at 0, with ``backlog`` offsets left."""
    return (PartitionBacklog("orders", 0, 0, backlog, backlog, 0, backlog),)


def test_rate_covers_the_window_and_drain_is_backlog_over_rate() -> None:
    watch = BacklogWatch()
    for second in range(61):
        found = watch.sample(float(second), 100 * second, lagging(6_000))
    assert found.rate == 100.0
    assert found.drain_seconds == 60.0
    assert watch.latest is found
    # A burst in the last second counts for its share of the window, not as the rate.
    watch.sample(61.0, 6_000 + 3_000, lagging(6_000))
    assert watch.latest.rate == (9_000 - 100 * 31) / RATE_WINDOW


def test_a_stall_shows_as_a_falling_rate_then_zero_and_a_finite_growing_drain() -> None:
    watch = BacklogWatch()
    for second in range(31):
        watch.sample(float(second), 10 * second, lagging(1_000))
    steady = watch.latest
    rates, drains = [], []
    for second in range(31, 63):  # nothing more finishes
        found = watch.sample(float(second), 300, lagging(1_000))
        rates.append(found.rate)
        drains.append(found.drain_seconds)
    assert steady.rate == 10.0
    assert rates[0] < steady.rate and rates == sorted(rates, reverse=True)
    assert rates[-1] == 0.0
    # Fewer than one message in 30 s: at least 1,000 x 30 s, and never infinite.
    assert drains[-1] == 1_000 * RATE_WINDOW
    assert all(d is not None and math.isfinite(d) for d in drains)


def test_no_backlog_drains_in_no_time_even_without_a_rate() -> None:
    found = BacklogWatch().sample(0.0, 0, lagging(0))
    assert (found.backlog, found.rate, found.drain_seconds) == (0, 0.0, 0.0)


def test_at_the_first_sample_the_drain_bound_is_one_second_per_message() -> None:
    found = BacklogWatch().sample(5.0, 0, lagging(40))
    assert (found.rate, found.drain_seconds) == (0.0, 40.0)


def test_a_source_without_offsets_has_a_rate_but_no_backlog() -> None:
    watch = BacklogWatch()
    watch.sample(0.0, 0, None)
    found = watch.sample(10.0, 50, None)
    assert (found.backlog, found.lag, found.rate, found.drain_seconds) == (None, None, 5.0, None)
    assert found.as_json() == {
        "backlog": None,
        "lag": None,
        "rate": 5.0,
        "drain_seconds": None,
        "partitions": [],
        "stalled": [],
    }


def test_as_json_has_the_contract_keys_and_the_partitions_as_laneway_lag_prints_them() -> None:
    found = Backlog(3, 10, 1 / 3, 9.0000004)
    assert found.as_json() == {
        "backlog": 3,
        "lag": 10,
        "rate": 0.333,
        "drain_seconds": 9.0,
        "partitions": [],
        "stalled": [],
    }
    sampled = BacklogWatch().sample(0.0, 0, owning({A: held(10, 7)}).backlog({A: 20}))
    assert sampled.as_json()["partitions"] == [
        {
            "topic": "orders",
            "partition": 0,
            "committed": 10,
            "end": 20,
            "lag": 10,
            "finished_beyond": 7,
            "backlog": 3,
        }
    ]


def message(pid: PartitionId, offset: int) -> Message:
    return Message(pid[0], pid[1], offset, None, b"")


def sample(tally: Tally, backlog: Backlog) -> None:
    tally.sample(
        in_flight=0,
        buffered=0,
        paused=0,
        committed={},
        worker_restarts=0,
        oldest={},
        ends={},
        backlog=backlog,
        waiting={},
    )


def test_gauges_count_a_partition_given_away_as_zero() -> None:
    recorder = Recorder()
    tally = Tally(recorder)
    both = owning({A: held(10, 7), B: CommitPosition(5, "")})
    sampled = BacklogWatch().sample(0.0, 0, both.backlog({A: 20, B: 8}))
    sample(tally, sampled)
    assert recorder.gauges[(Metric.BACKLOG, ("orders", "0"))] == 3
    assert recorder.gauges[(Metric.BACKLOG, ("orders", "1"))] == 3
    assert recorder.gauges[(Metric.DRAIN_SECONDS, ())] == sampled.drain_seconds
    only_a = owning({A: held(10, 8)}).backlog({A: 20})
    sample(tally, BacklogWatch().sample(0.0, 0, only_a))
    assert recorder.gauges[(Metric.BACKLOG, ("orders", "0"))] == 2
    assert recorder.gauges[(Metric.BACKLOG, ("orders", "1"))] == 0


def test_an_unknown_drain_time_is_not_a_number() -> None:
    recorder = Recorder()
    sample(Tally(recorder), Backlog(None, None, 4.0, None))
    assert math.isnan(recorder.gauges[(Metric.DRAIN_SECONDS, ())])
    assert not [key for key in recorder.gauges if key[0] is Metric.BACKLOG]


def test_a_stalled_call_is_in_the_backlog_with_what_waits_behind_it_keys_only_when_asked() -> None:
    waiting = Waiting(7, 3, (b"acct-2", b"acct-9", b"acct-4"), (("orders", 1), ("orders", 4)))
    stall = Stall("orders", 1, 40, b"acct-5", 12.34567, waiting=waiting, held_back=5)
    found = BacklogWatch().sample(0.0, 0, lagging(10), (stall,))
    hidden = found.as_json()["stalled"]
    assert hidden == [
        {
            "topic": "orders",
            "partition": 1,
            "offset": 40,
            "seconds": 12.346,
            "waiting": {
                "messages": 7,
                "keys": 3,
                "partitions": [
                    {"topic": "orders", "partition": 1},
                    {"topic": "orders", "partition": 4},
                ],
            },
            "held_back": 5,
        }
    ]
    shown = found.as_json(keys=True)["stalled"][0]
    assert shown["key"] == "acct-5"
    assert shown["waiting"]["keys_named"] == ["acct-2", "acct-9", "acct-4"]
