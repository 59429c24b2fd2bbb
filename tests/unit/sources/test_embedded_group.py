"""Consumer groups of the embedded log: assignment, cooperative handover, fencing, polling."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping, Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from laneway.errors import SourceError
from laneway.sources.embedded.group import Group, Member
from laneway.sources.embedded.log import EmbeddedLog, EmbeddedSource
from laneway.types import CommitPosition, Message, PartitionId

Event = tuple[str, str, tuple[PartitionId, ...]]


class Journal:
    """Every callback of every member in one global order; flags double ownership."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.events: list[Event] = []
        self.owner: dict[PartitionId, str] = {}
        self.violations: list[str] = []

    def of(self, member: str, kind: str) -> list[PartitionId]:
        return [pid for k, m, pids in self.events if (k, m) == (kind, member) for pid in pids]

    def owned_by(self, member: str) -> set[PartitionId]:
        return {pid for pid, m in self.owner.items() if m == member}


class Listener:
    """Writes to the journal; ``on_revoke`` (if set) runs first, e.g. to commit."""

    def __init__(self, journal: Journal, name: str) -> None:
        self.journal = journal
        self.name = name
        self.on_revoke: Callable[[Sequence[PartitionId]], None] | None = None
        self.positions: dict[PartitionId, CommitPosition | None] = {}

    def on_assigned(self, positions: Mapping[PartitionId, CommitPosition | None]) -> None:
        self.positions.update(positions)
        with self.journal.lock:
            for pid in positions:
                if pid in self.journal.owner:
                    self.journal.violations.append(f"{pid} to {self.name}: {self.journal.owner}")
                self.journal.owner[pid] = self.name
            self.journal.events.append(("assigned", self.name, tuple(sorted(positions))))

    def on_revoked(self, partitions: Sequence[PartitionId]) -> None:
        if self.on_revoke is not None:
            self.on_revoke(partitions)
        self.drop("revoked", partitions)

    def on_lost(self, partitions: Sequence[PartitionId]) -> None:
        self.drop("lost", partitions)

    def drop(self, kind: str, partitions: Sequence[PartitionId]) -> None:
        with self.journal.lock:
            for pid in partitions:
                if self.journal.owner.get(pid) == self.name:
                    del self.journal.owner[pid]
            self.journal.events.append((kind, self.name, tuple(partitions)))


def member(
    log: EmbeddedLog, journal: Journal, name: str, group: str = "g", **kwargs: float
) -> tuple[EmbeddedSource, Listener]:
    source = log.subscribe(["t"], group=group, **kwargs)
    listener = Listener(journal, name)
    source.open(listener)
    return source, listener


def leave(source: EmbeddedSource, listener: Listener) -> None:
    """What a consumer does on shutdown: stop using its partitions, then close the source."""
    listener.drop("closed", source.assignment())
    source.close()


def topic_log(partitions: int = 8, records: int = 0) -> EmbeddedLog:
    log = EmbeddedLog()
    log.create_topic("t", partitions=partitions)
    for i in range(records):
        log.produce("t", b"%d" % i, partition=i % partitions)
    return log


@settings(max_examples=200, deadline=None)
@given(
    partitions=st.integers(min_value=1, max_value=24),
    steps=st.lists(st.integers(min_value=-1, max_value=5), min_size=1, max_size=20),
)
def test_assignment_is_balanced_and_moves_only_what_it_must(
    partitions: int, steps: list[int]
) -> None:
    group = Group("g", {"t": partitions})
    for step in steps:
        before = dict(group.target)
        if step < 0 or not group.members:
            changed = Member("g", ("t",), 10.0)
            group.join(changed, 0.0)
        else:
            changed = group.members[step % len(group.members)]
            group.leave(changed)
        counts = [sum(1 for m in group.target.values() if m is x) for x in group.members]
        assert sum(counts) == (partitions if group.members else 0)
        assert not counts or max(counts) - min(counts) <= 1
        for pid, owner in group.target.items():
            if pid in before and before[pid] is not owner:
                assert changed in (before[pid], owner)


def test_two_members_split_the_partitions() -> None:
    journal = Journal()
    with topic_log(records=80) as log:
        a, _ = member(log, journal, "a")
        b, _ = member(log, journal, "b")
        got_a, got_b = a.poll(1000, 0.0), b.poll(1000, 0.0)
        assert len(journal.owned_by("a")) == len(journal.owned_by("b")) == 4
        assert journal.owned_by("a") | journal.owned_by("b") == {("t", p) for p in range(8)}
        assert {m.partition for m in got_a} == {p for _, p in journal.owned_by("a")}
        assert len(got_a) + len(got_b) == 80
        assert sorted(a.assignment()) == sorted(journal.owned_by("a"))
        assert journal.events[0][0] == "assigned" and not journal.violations


def test_a_joiner_gets_partitions_only_after_their_owners_revoked_them() -> None:
    journal = Journal()
    with topic_log() as log:
        a, _ = member(log, journal, "a")
        b, _ = member(log, journal, "b")
        a.poll(10, 0.0)
        b.poll(10, 0.0)
        before = {"a": journal.owned_by("a"), "b": journal.owned_by("b")}
        c, c_listener = member(log, journal, "c")
        c.poll(10, 0.0)
        assert journal.of("c", "assigned") == []
        a.poll(10, 0.0)
        assert journal.of("c", "assigned") == []
        b.poll(10, 0.0)
        c.poll(10, 0.0)
        moved = journal.of("a", "revoked") + journal.of("b", "revoked")
        assert sorted(journal.of("c", "assigned")) == sorted(moved)
        assert len(moved) == 2 and len(journal.of("a", "revoked")) == 1
        assert journal.owned_by("a") < before["a"] and journal.owned_by("b") < before["b"]
        kinds = [(kind, name) for kind, name, _ in journal.events[2:]]
        assert kinds == [("revoked", "a"), ("revoked", "b"), ("assigned", "c")]
        assert not journal.violations

        leave(c, c_listener)
        c.close()
        a.poll(10, 0.0)
        b.poll(10, 0.0)
        assert len(journal.owned_by("a")) == len(journal.owned_by("b")) == 4
        assert [kind for kind, _, _ in journal.events[6:]] == ["assigned", "assigned"]
        assert not journal.violations


def test_commit_during_revoke_counts_and_later_commits_are_fenced() -> None:
    journal = Journal()
    with topic_log(partitions=2, records=20) as log:
        a, listener = member(log, journal, "a")
        got = a.poll(100, 0.0)
        assert len(got) == 20

        def commit_on_revoke(partitions: Sequence[PartitionId]) -> None:
            a.commit({pid: CommitPosition(7, f"meta-{pid[1]}") for pid in partitions})

        listener.on_revoke = commit_on_revoke
        b, b_listener = member(log, journal, "b")
        assert b.poll(100, 0.0) == []
        a.poll(100, 0.0)
        (moved,) = journal.of("a", "revoked")
        with pytest.raises(SourceError, match=rf"not owned .*\('t', {moved[1]}\)"):
            a.commit({moved: CommitPosition(10)})
        resumed = b.poll(100, 0.0)
        assert b_listener.positions == {moved: CommitPosition(7, f"meta-{moved[1]}")}
        assert [m.offset for m in resumed] == [7, 8, 9]
        assert log.committed("g", "t") == {moved[1]: CommitPosition(7, f"meta-{moved[1]}")}
        with pytest.raises(SourceError, match="not owned"):
            b.commit({("t", 1 - moved[1]): CommitPosition(1)})


def test_a_silent_member_loses_its_partitions_after_the_session_timeout() -> None:
    journal = Journal()
    with topic_log(records=16) as log:
        a, _ = member(log, journal, "a", session_timeout=0.3)
        b, _ = member(log, journal, "b")
        a.poll(100, 0.0)
        b.poll(100, 0.0)
        a_had = journal.owned_by("a")
        assert len(a_had) == 4
        deadline = time.monotonic() + 5.0
        while len(journal.owned_by("b")) < 8 and time.monotonic() < deadline:
            b.poll(100, 0.05)
        assert b.assignment() == [("t", p) for p in range(8)]
        assert journal.of("a", "revoked") == []
        with pytest.raises(SourceError, match="not owned"):
            a.commit({next(iter(a_had)): CommitPosition(1)})
        a.poll(100, 0.0)
        assert sorted(journal.of("a", "lost")) == sorted(a_had)
        b.poll(100, 0.0)
        a.poll(100, 0.0)
        assert len(journal.of("b", "revoked")) == 4
        assert len(a.assignment()) == len(b.assignment()) == 4


def test_a_polling_member_is_never_evicted_and_a_lone_slow_member_keeps_its_partitions() -> None:
    journal = Journal()
    with topic_log(partitions=2) as log:
        a, _ = member(log, journal, "a", session_timeout=0.5)
        a.poll(10, 0.0)
        time.sleep(0.8)
        a.poll(10, 0.0)
        b, _ = member(log, journal, "b", session_timeout=0.5)
        for _ in range(30):
            a.poll(10, 0.02)
            b.poll(10, 0.02)
        assert journal.of("a", "lost") == journal.of("b", "lost") == []
        assert len(a.assignment()) == len(b.assignment()) == 1


def test_pause_and_resume() -> None:
    journal = Journal()
    with topic_log(partitions=2) as log:
        a, _ = member(log, journal, "a")
        assert a.poll(100, 0.0) == []
        for i in range(10):
            log.produce("t", b"", partition=i % 2)
        a.pause([("t", 0), ("t", 9)])
        first = a.poll(100, 0.0)
        assert {m.partition for m in first} == {1}
        a.pause([("t", 0)])
        assert a.poll(100, 0.0) == []
        log.produce("t", b"x", partition=0)
        assert a.poll(100, 0.0) == []
        a.resume([("t", 0)])
        assert [m.offset for m in a.poll(100, 0.0)] == [0, 1, 2, 3, 4, 5]


def test_unread_counts_records_beyond_what_poll_returned() -> None:
    journal = Journal()
    with topic_log(partitions=2, records=10) as log:
        a, _ = member(log, journal, "a")
        (first,) = a.poll(1, 0.0)  # joins, is assigned both partitions, returns one record
        left = {("t", p): 5 - (first.partition == p) for p in (0, 1)}
        assert a.unread([("t", 0), ("t", 1), ("t", 7)]) == left
        a.pause([("t", 1)])
        more = a.poll(100, 0.0)
        assert {m.partition for m in more} == {0}
        assert a.unread([("t", 0), ("t", 1)]) == {("t", 0): 0, ("t", 1): left[("t", 1)]}
        log.produce("t", b"x", partition=0)
        assert a.unread([("t", 0)]) == {("t", 0): 1}


def test_commit_metadata_round_trips_to_the_next_owner() -> None:
    journal = Journal()
    with topic_log(partitions=1, records=5) as log:
        other, other_listener = member(log, journal, "o", group="other")
        a, _ = member(log, journal, "a")
        a.poll(2, 0.0)
        a.commit({("t", 0): CommitPosition(2, "done:3,4")})
        assert log.committed("g", "t") == {0: CommitPosition(2, "done:3,4")}
        assert log.committed("other", "t") == {}
        assert log.start_offsets("t") == {0: 0}
        a.close()
        b, listener = member(log, journal, "b")
        assert [m.offset for m in b.poll(10, 0.0)] == [2, 3, 4]
        assert listener.positions == {("t", 0): CommitPosition(2, "done:3,4")}
        assert [m.offset for m in other.poll(10, 0.0)] == [0, 1, 2, 3, 4]
        assert other_listener.positions == {("t", 0): None}


def test_poll_shares_the_batch_fairly_and_rotates() -> None:
    journal = Journal()
    with topic_log(partitions=4) as log:
        for p, count in enumerate([1000, 1000, 10, 1000]):
            for _ in range(count):
                log.produce("t", b"", partition=p)
        a, _ = member(log, journal, "a")
        batch = a.poll(100, 0.0)
        counts = {p: sum(1 for m in batch if m.partition == p) for p in range(4)}
        assert counts == {0: 30, 1: 30, 2: 10, 3: 30}
        for p in range(4):
            assert [m.offset for m in batch if m.partition == p] == list(range(counts[p]))
        firsts = {a.poll(1, 0.0)[0].partition for _ in range(3)}
        assert firsts == {0, 1, 3}


def test_wakeup_ends_a_waiting_poll_from_another_thread() -> None:
    journal = Journal()
    with topic_log(partitions=1) as log:
        a, _ = member(log, journal, "a")
        a.poll(1, 0.0)
        threading.Timer(0.2, a.wakeup).start()
        started = time.monotonic()
        assert a.poll(10, 10.0) == []
        assert 0.1 < time.monotonic() - started < 3.0


def test_produce_and_rebalance_wake_a_waiting_poll() -> None:
    journal = Journal()
    with topic_log(partitions=2) as log:
        a, _ = member(log, journal, "a")
        a.poll(1, 0.0)
        threading.Timer(0.2, lambda: log.produce("t", b"hi", partition=1)).start()
        started = time.monotonic()
        assert [m.value for m in a.poll(10, 10.0)] == [b"hi"]
        assert time.monotonic() - started < 3.0

        revoked_at: list[float] = []
        listener_thread = threading.Thread(target=lambda: a.poll(10, 3.0))
        journal_len = len(journal.events)
        listener_thread.start()
        time.sleep(0.2)
        joined_at = time.monotonic()
        b, _ = member(log, journal, "b")
        deadline = joined_at + 3.0
        while not journal.of("a", "revoked") and time.monotonic() < deadline:
            time.sleep(0.01)
        revoked_at.append(time.monotonic())
        listener_thread.join(5.0)
        assert journal.events[journal_len][:2] == ("revoked", "a")
        assert revoked_at[0] - joined_at < 1.5
        b.poll(10, 0.0)
        assert len(b.assignment()) == 1


def test_members_in_threads_joining_and_leaving_never_share_a_partition() -> None:
    total = 20_000
    journal = Journal()
    seen: list[tuple[int, int]] = []
    seen_lock = threading.Lock()
    stop = threading.Event()
    with topic_log(partitions=6) as log:

        def consume(name: str, leave_after: float | None) -> None:
            source, listener = member(log, journal, name)
            done: dict[PartitionId, int] = {}

            def commit_done(partitions: Sequence[PartitionId]) -> None:
                source.commit({pid: CommitPosition(done[pid]) for pid in partitions if pid in done})

            listener.on_revoke = commit_done
            started = time.monotonic()
            while not stop.is_set():
                if leave_after is not None and time.monotonic() - started > leave_after:
                    break
                batch: list[Message] = source.poll(50, 0.05)
                for m in batch:
                    done[(m.topic, m.partition)] = m.offset + 1
                with seen_lock:
                    seen.extend((m.partition, m.offset) for m in batch)
                owned = set(source.assignment())
                source.commit({pid: CommitPosition(o) for pid, o in done.items() if pid in owned})
                time.sleep(0.001)
            commit_done(source.assignment())
            leave(source, listener)

        threads = [
            threading.Thread(target=consume, args=("a", None)),
            threading.Thread(target=consume, args=("b", 0.5)),
        ]
        for t in threads:
            t.start()
        for i in range(total):
            log.produce("t", b"%d" % i, key=b"k%d" % (i % 97))
            if i == total // 3:
                late = threading.Thread(target=consume, args=("c", None))
                late.start()
                threads.append(late)
        deadline = time.monotonic() + 60.0
        while len(seen) < total and time.monotonic() < deadline:
            time.sleep(0.05)
        stop.set()
        for t in threads:
            t.join(10.0)
    assert not journal.violations
    assert len(seen) == len(set(seen)) == total
    assert {"a", "b", "c"} <= {name for _, name, _ in journal.events}


def test_a_member_reads_several_topics_and_commits_are_validated() -> None:
    journal = Journal()
    with topic_log(partitions=2, records=4) as log:
        log.create_topic("u", partitions=3)
        for i in range(3):
            log.produce("u", b"u%d" % i, partition=i)
        source = log.subscribe(["t", "u"], group="g")
        listener = Listener(journal, "a")
        source.open(listener)
        got = source.poll(100, 0.0)
        assert sorted({(m.topic, m.partition) for m in got}) == sorted(listener.positions)
        assert len(got) == 7 and len(listener.positions) == 5
        with pytest.raises(SourceError, match="offset >= 0 and str metadata"):
            source.commit({("u", 0): CommitPosition(-1)})
        with pytest.raises(SourceError, match="offset >= 0 and str metadata"):
            source.commit({("u", 0): CommitPosition(1, None)})  # type: ignore[arg-type]
        source.commit({("u", 0): CommitPosition(1), ("t", 1): CommitPosition(2, "m")})
        assert log.committed("g", "u") == {0: CommitPosition(1)}
        assert log.committed("g", "t") == {1: CommitPosition(2, "m")}
        with pytest.raises(SourceError, match="already open"):
            source.open(listener)
        source.close()
        with pytest.raises(SourceError, match="closed"):
            source.poll(1, 0.0)
