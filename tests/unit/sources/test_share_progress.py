"""ShareProgress and the crash journal as pure logic: a fake acknowledger, real files.

What a share group does on a real broker is tested in ``test_share_group.py``; here, the
decisions: which acknowledgement each record gets, when a failure is retried by
redelivery, when the next fetch may come, and how crash suspects run.
"""

from __future__ import annotations

import multiprocessing
import os
import threading
import time
from collections import Counter
from pathlib import Path

import pytest
from metrics_recorder import Recorder

from laneway.config import ConsumerConfig
from laneway.control.backpressure import Backpressure
from laneway.metrics import Metric
from laneway.sources.share.acknowledgement import Acknowledgement
from laneway.sources.share.crash_journal import DYING_GRACE_S, CrashJournal
from laneway.sources.share.progress import LOCK_MARGIN, ShareProgress
from laneway.sources.share.source import SHARE_GROUP
from laneway.types import Failure, Message, PartitionId


class FakeGroup:
    """A RecordAcknowledger that records acknowledgements; one fetch at a time."""

    def __init__(self, lock: float = 30.0, limit: int = 5) -> None:
        self.acks: list[tuple[int, Acknowledgement]] = []
        self.pending = 0
        self.acquired_at = 0.0
        self.lock_duration = lock
        self.delivery_limit = limit
        self.flushed = 0
        self.refusals: dict[str, int] = {}

    def fetch(self, messages: list[Message], now: float) -> list[Message]:
        assert self.pending == 0, "explicit acknowledgement: the previous fetch is not done"
        self.pending, self.acquired_at = len(messages), now
        return messages

    def acknowledge(self, messages: list[Message], kind: Acknowledgement) -> None:
        self.acks += [(m.offset, kind) for m in messages]
        self.pending -= len(messages)

    def flush(self) -> bool:
        self.flushed += 1
        return True

    def refused(self) -> dict[str, int]:
        refused, self.refusals = self.refusals, {}
        return refused

    @property
    def awaiting_acknowledgement(self) -> int:
        return self.pending

    @property
    def unacknowledged(self) -> int:
        return self.pending


def records(offsets: range, delivery: int = 1, partition: int = 0) -> list[Message]:
    return [Message("t", partition, o, None, b"v", (), 0, delivery) for o in offsets]


def failure(message: Message) -> Failure:
    return Failure(message, "ValueError", "no", 1)


def progress(group: FakeGroup, journal: CrashJournal | None = None, **options: object):  # type: ignore[no-untyped-def]
    config = ConsumerConfig.from_options({"ordering": "unordered", **options})
    return ShareProgress(group, config, journal)


def test_finished_records_are_accepted_and_the_next_fetch_waits_for_the_last() -> None:
    group = FakeGroup()
    share = progress(group)
    batch = group.fetch(records(range(4)), now=0.0)
    assert share.accept(batch) == batch
    assert share.counts.buffered == 4 and share.awaiting(0.0) == 4
    assert dict(share.partitions)[("t", 0)].buffered == 4
    share.settle(batch[:3], [])
    assert share.awaiting(0.0) == 1 and share.counts.buffered == 1
    share.settle(batch[3:], [])
    assert share.awaiting(0.0) == 0 and share.counts.buffered == 0 and not share.partitions
    assert group.acks == [(o, Acknowledgement.ACCEPT) for o in range(4)]
    share.commit([])
    assert group.flushed == 1 and share.counts.commits == 1 and share.committed() == {}


def test_bytes_and_partition_loads_follow_partial_and_whole_settles() -> None:
    group = FakeGroup()
    share = progress(group, max_retries=2, retry_backoff=60.0)
    batch = group.fetch(records(range(3)) + records(range(3, 5), partition=1), now=0.0)
    share.accept(batch)
    assert share.counts.buffered_bytes == 5
    share.settle(batch[:2], [])  # part of the fetch: weighed and counted per partition
    assert share.counts.buffered == 3 and share.counts.buffered_bytes == 3
    assert {pid: load.buffered for pid, load in share.partitions.items()} == {
        ("t", 0): 1,
        ("t", 1): 2,
    }
    assert share.failed([failure(batch[2])]) == []  # held for its backoff: still buffered
    share.settle(batch[3:], [])
    assert share.counts.buffered == 1 and share.counts.buffered_bytes == 1
    assert {pid: load.buffered for pid, load in share.partitions.items()} == {("t", 0): 1}
    share.awaiting(time.monotonic() + 61.0)  # the backoff is over: released, all settled
    assert share.counts.buffered == 0 and share.counts.buffered_bytes == 0 and not share.partitions


def test_a_failure_is_released_after_its_backoff_while_deliveries_are_left() -> None:
    group = FakeGroup()
    metrics = Recorder()
    share = progress(group, max_retries=2, retry_backoff=0.5, metrics=metrics)
    first, second, third = group.fetch(records(range(3), delivery=1), now=time.monotonic())
    share.accept([first, second, third])
    share.settle([second, third], [])
    before = time.monotonic()
    assert share.failed([failure(first)]) == [], "delivery 1 of 3 allowed: retried"
    after = time.monotonic()
    assert share.counts.buffered == 1 and share.awaiting(before) == 1, "held for its backoff"
    assert (0, Acknowledgement.RELEASE) not in group.acks
    assert share.awaiting(after + 0.5 + 1e-6) == 0, "released once the backoff is over"
    assert group.acks[-1] == (0, Acknowledgement.RELEASE) and share.counts.buffered == 0
    assert metrics.counters[(Metric.RETRIES, ("t",))] == 1
    assert metrics.counters[(Metric.ACKNOWLEDGEMENTS, ("t", "release"))] == 1


@pytest.mark.parametrize(("delivery", "limit"), [(3, 5), (2, 2)])
def test_the_last_delivery_is_given_up_with_its_delivery_count_as_attempts(
    delivery: int, limit: int
) -> None:
    group = FakeGroup(limit=limit)
    share = progress(group, max_retries=2)
    [message] = group.fetch(records(range(1), delivery=delivery), now=0.0)
    share.accept([message])
    [given_up] = share.failed([failure(message)])
    assert given_up.attempts == delivery and given_up.message == message
    assert group.acks == [], "rejected only once settled (its dead letter acknowledged)"
    assert share.awaiting(1e9) == 1
    share.settle([], [message])
    assert group.acks == [(0, Acknowledgement.REJECT)] and share.awaiting(0.0) == 0


def test_a_backoff_never_outlasts_the_record_lock() -> None:
    group = FakeGroup(lock=2.0)
    share = progress(group, max_retries=3, retry_backoff=60.0, retry_backoff_max=60.0)
    fetched = time.monotonic()
    [message] = group.fetch(records(range(1)), now=fetched)
    share.accept([message])
    assert share.failed([failure(message)]) == []
    released_by = fetched + 2.0 * (1 - LOCK_MARGIN)
    assert share.awaiting(released_by - 0.05) == 1
    assert share.awaiting(released_by + 0.01) == 0


def test_records_an_engine_gives_back_are_released_at_once() -> None:
    group = FakeGroup()
    share = progress(group)
    batch = group.fetch(records(range(3)), now=0.0)
    share.accept(batch)
    share.unstarted(batch[1:])
    assert group.acks == [(1, Acknowledgement.RELEASE), (2, Acknowledgement.RELEASE)]
    assert share.counts.buffered == 1


def test_redeliveries_are_counted_per_topic() -> None:
    group = FakeGroup()
    metrics = Recorder()
    share = progress(group, metrics=metrics)
    batch = group.fetch(records(range(2), delivery=1) + records(range(2, 5), delivery=2), 0.0)
    share.accept(batch)
    assert metrics.counters[(Metric.REDELIVERIES, ("t",))] == 3


def test_the_lock_guard_warns_once_per_fetch(caplog: pytest.LogCaptureFixture) -> None:
    group = FakeGroup(lock=10.0)
    metrics = Recorder()
    share = progress(group, metrics=metrics)
    batch = group.fetch(records(range(2)), now=time.monotonic() - 9.0)
    share.accept(batch)
    share.commit([])
    share.commit([])
    warnings = [r for r in caplog.records if "record lock is 10 s" in r.getMessage()]
    assert len(warnings) == 1 and "2 record(s)" in warnings[0].getMessage()
    assert metrics.gauges[(Metric.OLDEST_ACQUIRED, ())] >= 9.0
    group.refusals = {"t": 2}
    share.commit([])
    assert share.counts.fenced == 2 and metrics.counters[(Metric.ACKNOWLEDGE_ERRORS, ("t",))] == 2


def test_a_source_that_cannot_pause_is_not_polled_while_awaiting_or_full() -> None:
    class NoPause:
        def pause(self, partitions: object) -> None:
            raise AssertionError("a share group is never paused")

        resume = pause

        def unread(self, partitions: object) -> dict[PartitionId, int]:
            return {}

    group = FakeGroup()
    share = progress(group)
    backpressure = Backpressure(
        NoPause(),
        max_buffered=100,
        poll_batch_size=50,
        max_buffered_bytes=1 << 30,
        capabilities=SHARE_GROUP,
    )
    assert backpressure.next_turn(share, 0.0).poll == 50
    batch = group.fetch(records(range(100)), now=0.0)
    share.accept(batch)
    turn = backpressure.next_turn(share, 0.0)
    assert turn.poll == 0 and turn.at_least == 100, "awaiting the fetch's acknowledgements"
    group.pending = 0  # as if the source still held records of the fetch to hand out
    for _ in range(3):
        turn = backpressure.next_turn(share, 1.0)
        assert turn.poll == 0 and turn.wait > 0, "full: wait for room, never pause"


# -- the crash journal ---------------------------------------------------------------


def _die_with_records_in_flight(directory: str, alone: bool) -> None:
    journal = CrashJournal(Path(directory))
    journal.open()
    journal.dispatched(records(range(5)), fresh=True)
    journal.settled(records(range(2)))
    if alone:
        journal.alone(records(range(7, 8))[0])
    os._exit(9)  # no close(): the journal is left behind, as by a SIGKILL


def _dead_member(directory: Path, alone: bool = False) -> None:
    child = multiprocessing.get_context("spawn").Process(
        target=_die_with_records_in_flight, args=(str(directory), alone)
    )
    child.start()
    child.join(30)
    assert child.exitcode == 9


def _member_running(directory: Path) -> CrashJournal:
    """The journal of a member of this process with records 0-2 in flight (its lock held)."""
    journal = CrashJournal(directory)
    journal.open()
    journal.dispatched(records(range(3)), fresh=True)
    return journal


def test_a_dead_members_records_in_flight_become_suspects(tmp_path: Path) -> None:
    _dead_member(tmp_path, alone=True)
    journal = CrashJournal(tmp_path)
    journal.open()
    suspects = {record: (s.deaths, s.alone) for record, s in journal.suspects.items()}
    assert suspects == {
        ("t", 0, 2): (1, 0),
        ("t", 0, 3): (1, 0),
        ("t", 0, 4): (1, 0),
        ("t", 0, 7): (1, 1),
    }
    assert [p.name for p in tmp_path.glob("member-*")] == [journal._path.name]
    other = CrashJournal(tmp_path)
    other.open()
    assert set(other.suspects) == set(suspects), "every member sees the suspects"
    journal.forget([("t", 0, 2), ("t", 9, 9)])
    assert other.refresh() and ("t", 0, 2) not in other.suspects
    journal.close()
    other.close()
    assert not list(tmp_path.glob("member-*")), "a clean close leaves no journal behind"


def test_a_live_members_journal_is_not_adopted(tmp_path: Path) -> None:
    alive = _member_running(tmp_path)
    other = CrashJournal(tmp_path)
    other.open()
    assert other.suspects == {}
    alive.close()
    other.close()


def test_a_record_delivered_again_waits_for_the_lock_of_its_dying_member(
    tmp_path: Path,
) -> None:
    # The broker releases a dying member's records as its connections drop; its journal's
    # lock is freed a moment later in the same exit. A record redelivered in between must
    # still be known as a suspect (else it runs with others, and kills a second member).
    dying = _member_running(tmp_path)
    journal = CrashJournal(tmp_path)
    journal.open()
    assert journal.suspects == {}, "its member holds the lock: not adopted yet"
    group = FakeGroup()
    share = progress(group, journal)
    threading.Timer(0.2, os.close, [dying._fd]).start()  # the exit frees the lock
    batch = group.fetch(records(range(1, 2), delivery=2) + records(range(5, 6)), now=0.0)
    runnable = share.accept(batch)
    assert set(journal.suspects) == {("t", 0, 0), ("t", 0, 1), ("t", 0, 2)}
    assert [m.offset for m in runnable] == [5], "the suspect waits to run alone"
    assert [m.offset for m in share.settle(runnable, [])] == [1]
    journal.close()


def test_a_record_delivered_again_while_its_member_lives_runs_after_a_grace(
    tmp_path: Path,
) -> None:
    # A live member whose record lock expired still has the record in flight: no death.
    alive = _member_running(tmp_path)
    journal = CrashJournal(tmp_path)
    journal.open()
    share = progress(FakeGroup(), journal)
    started = time.monotonic()
    runnable = share.accept(FakeGroup().fetch(records(range(1, 2), delivery=2), now=0.0))
    assert time.monotonic() - started >= DYING_GRACE_S, "it looked again for a grace"
    assert [m.offset for m in runnable] == [1] and journal.suspects == {}
    assert sorted(p.name for p in tmp_path.glob("member-*")) == sorted(
        [alive._path.name, journal._path.name]
    ), "the live member's journal is left alone"
    alive.close()
    journal.close()


def test_suspects_run_alone_and_a_record_that_died_alone_is_given_up(tmp_path: Path) -> None:
    _dead_member(tmp_path, alone=True)
    journal = CrashJournal(tmp_path)
    journal.open()
    group = FakeGroup()
    metrics = Recorder()
    share = progress(group, journal, metrics=metrics)
    batch = group.fetch(records(range(9), delivery=2), now=0.0)
    runnable = share.accept(batch)
    assert [m.offset for m in runnable] == [0, 1, 5, 6, 8], "suspects 2-4 wait, 7 is doomed"
    assert metrics.counters[(Metric.CRASH_SUSPECTS, ("t",))] == 4
    [doomed] = share.failed([])
    assert doomed.error_type == "ProcessDied" and doomed.message.offset == 7
    assert doomed.attempts == 2
    alone = share.settle(runnable, [])
    assert [m.offset for m in alone] == [2], "with nothing else in flight, one suspect runs"
    assert share.settle([], [doomed.message]) == [], "the doomed record settles unrun"
    assert [m.offset for m in share.settle(alone, [])] == [3]
    assert ("t", 0, 2) not in journal.suspects, "a suspect that finished is forgotten"
    last = share.settle([batch[3]], [])
    assert [m.offset for m in last] == [4]
    assert share.settle(last, []) == []
    assert share.counts.buffered == 0 and share.awaiting(0.0) == 0
    kinds = Counter(kind for _, kind in group.acks)
    assert kinds == {Acknowledgement.ACCEPT: 8, Acknowledgement.REJECT: 1}
    journal.close()


def test_a_suspect_that_raises_is_retried_and_the_next_one_runs(tmp_path: Path) -> None:
    _dead_member(tmp_path)
    journal = CrashJournal(tmp_path)
    journal.open()
    group = FakeGroup()
    share = progress(group, journal, max_retries=3)
    batch = group.fetch(records(range(2, 5), delivery=2), now=time.monotonic())
    [first] = share.accept(batch)
    assert share.failed([failure(first)]) == [], "raised, not died: retried by redelivery"
    assert ("t", 0, 2) not in journal.suspects
    assert [m.offset for m in share.settle([], [])] == [3], "the next suspect runs alone"
    journal.close()
