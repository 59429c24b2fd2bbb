"""The Source protocol's promises as a test suite: subclass per source.

``SourceContract`` holds what every source promises (polling every message with its
fields, its producer, usage errors); ``OffsetSourceContract`` adds what sources that own
partitions and commit offsets promise (assignments, pause/resume, unread, durable commits
through their Progress, seeding the next owner, revocations). A Kafka share group keeps
only the first part: its partitions are shared, so nothing is assigned, paused, counted
as unread or committed (its own promises are in ``test_share_group.py``), and its polls
must be settled through its Progress before it fetches again (``SETTLES_POLLS``).
A subclass provides the ``new_topic`` fixture (a :class:`topics.LogTopic` factory) and may
override :meth:`SourceContract.source` to open its source with test-friendly settings.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence

import pytest
from topics import LogTopic

from laneway.config import ConsumerConfig
from laneway.errors import SourceError
from laneway.offsets.progress import Progress
from laneway.producing.producer import Producer, WriteFailure
from laneway.results import Produce
from laneway.sources.base import Source
from laneway.types import CommitPosition, Message, PartitionId

WAIT_S = 30.0


def until_acknowledged(producer: Producer, timeout_s: float = WAIT_S) -> list[WriteFailure]:
    """Poll ``producer`` until nothing is unacknowledged (asserted); the failures it
    reported on the way."""
    failures = producer.poll()
    deadline = time.monotonic() + timeout_s
    while producer.unacknowledged and time.monotonic() < deadline:
        time.sleep(0.01)
        failures += producer.poll()
    assert producer.unacknowledged == 0, "the log answered in time"
    return failures


UNORDERED = {"ordering": "unordered"}


class Recorder:
    """A rebalance listener that records every call and keeps a Progress in step (as the
    control plane does); ``on_revoke_action`` runs inside ``on_revoked``. With
    ``settles_polls`` every polled batch is accepted and settled at once (as if handled),
    which a source that must acknowledge a fetch before the next needs."""

    def __init__(self, progress: Progress, settles_polls: bool = False) -> None:
        self.progress = progress
        self.settles_polls = settles_polls
        self.assigned: list[dict[PartitionId, CommitPosition | None]] = []
        self.revoked: list[list[PartitionId]] = []
        self.lost: list[list[PartitionId]] = []
        self.on_revoke_action: Callable[[Sequence[PartitionId]], None] | None = None

    @property
    def owned(self) -> set[PartitionId]:
        return set(self.progress.partitions)

    def on_assigned(self, positions: Mapping[PartitionId, CommitPosition | None]) -> None:
        self.assigned.append(dict(positions))
        self.progress.assign(positions)

    def on_revoked(self, partitions: Sequence[PartitionId]) -> None:
        self.revoked.append(list(partitions))
        if self.on_revoke_action is not None:
            self.on_revoke_action(partitions)
        self.progress.give_up(partitions)

    def on_lost(self, partitions: Sequence[PartitionId]) -> None:
        self.lost.append(list(partitions))
        self.progress.give_up(partitions)

    def polled(self, batch: list[Message]) -> list[Message]:
        if self.settles_polls and batch:
            self.progress.settle(self.progress.accept(batch), [])
        return batch


def poll_until(
    members: Iterable[tuple[Source, Recorder]],
    done: Callable[[], bool],
    into: dict[int, list[Message]] | None = None,
    timeout_s: float = WAIT_S,
) -> None:
    """Poll every source in turn until ``done()``; bounded in time and iterations."""
    members = list(members)
    deadline = time.monotonic() + timeout_s
    for _ in range(int(timeout_s / 0.05) + 1):
        if done() or time.monotonic() > deadline:
            break
        for index, (source, recorder) in enumerate(members):
            batch = recorder.polled(source.poll(500, 0.05))
            if into is not None:
                into.setdefault(index, []).extend(batch)
    assert done(), f"condition not reached within {timeout_s}s"


def poll_for(member: tuple[Source, Recorder], seconds: float) -> list[Message]:
    source, recorder = member
    got: list[Message] = []
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        got.extend(recorder.polled(source.poll(500, 0.05)))
    return got


def collect(member: tuple[Source, Recorder], count: int) -> list[Message]:
    got: dict[int, list[Message]] = {}
    poll_until([member], lambda: len(got.get(0, [])) >= count, got)
    return got[0]


def per_partition(placed: Iterable[tuple[int, int]], partitions: int) -> dict[int, int]:
    counts = dict.fromkeys(range(partitions), 0)
    for partition, _ in placed:
        counts[partition] += 1
    return counts


class SourceContract:
    """What every source promises."""

    SETTLES_POLLS = False
    """Whether each poll must be settled before the source fetches again (share groups)."""
    ASSIGNS_PARTITIONS = True
    """Whether the source tells its listener which partitions it owns (not share groups)."""

    @pytest.fixture
    def new_topic(self) -> Callable[[int], LogTopic]:
        raise NotImplementedError("a subclass provides the topic factory")

    @pytest.fixture
    def opened(self) -> Iterator[list[Source]]:
        """Sources opened by a test, closed at teardown."""
        sources: list[Source] = []
        yield sources
        for source in sources:
            source.close()

    def source(self, topic: LogTopic, group: str) -> Source:
        """A new, unopened source of ``group`` on ``topic``."""
        return topic.source(group)

    def open(
        self, opened: list[Source], topic: LogTopic, group: str = "contract"
    ) -> tuple[Source, Recorder]:
        source = self.source(topic, group)
        config = ConsumerConfig.from_options({} if self.ASSIGNS_PARTITIONS else UNORDERED)
        recorder = Recorder(source.progress(config), self.SETTLES_POLLS)
        source.open(recorder)
        opened.append(source)
        return source, recorder

    def test_poll_returns_every_message_with_its_fields_in_partition_order(
        self, new_topic: Callable[[int], LogTopic], opened: list[Source]
    ) -> None:
        topic = new_topic(3)
        records: list[tuple[bytes | None, bytes, list[tuple[str, bytes | None]]]] = []
        for i in range(90):
            key = None if i % 10 == 0 else f"key-{i % 7}".encode()
            headers = [("trace", f"t{i}".encode()), ("empty", None)] if i % 3 == 0 else []
            records.append((key, f"value-{i}".encode(), headers))
        before_ms = int(time.time() * 1000)
        placed = topic.produce(records)
        after_ms = int(time.time() * 1000)
        expected = dict(zip(placed, records, strict=True))
        member = self.open(opened, topic)
        got = collect(member, len(records))
        assert len(got) == len(records)
        assert {(m.partition, m.offset) for m in got} == set(expected)
        if self.ASSIGNS_PARTITIONS:
            assert member[1].assigned == [{(topic.name, p): None for p in range(3)}]
        for m in got:
            key, value, headers = expected[(m.partition, m.offset)]
            assert isinstance(m, Message)
            assert (m.topic, m.key, m.value) == (topic.name, key, value)
            assert isinstance(m.headers, tuple) and m.headers == tuple(headers)
            assert before_ms - 1000 <= m.timestamp <= after_ms + 1000
        for partition in range(3):
            offsets = [m.offset for m in got if m.partition == partition]
            assert offsets == sorted(offsets) and len(offsets) == len(set(offsets))
        assert poll_for(member, 0.3) == []

    def test_the_producer_writes_into_the_same_log_and_acknowledges_it(
        self, new_topic: Callable[[int], LogTopic], opened: list[Source]
    ) -> None:
        topic = new_topic(3)
        source, _ = self.open(opened, topic)
        out = f"{topic.name}.out"
        producer = source.producer()
        producer.create_topic_like(out, like=topic.name)
        producer.create_topic_like(out, like=topic.name)  # idempotent
        records = [
            Produce(out, b"one", b"k1", [("h", b"1")]),
            Produce(out, b"two", None, [("none", None)]),
            Produce(out, b"three", b"k3", partition=2),
        ]
        assert producer.produce(records) == []
        failures = until_acknowledged(producer)
        producer.close(5.0)
        assert failures == []
        read = {value: (key, headers) for key, value, headers in topic.read(out, 3)}
        assert read == {
            b"one": (b"k1", [("h", b"1")]),
            b"two": (None, [("none", None)]),
            b"three": (b"k3", []),
        }

    def test_usage_errors_are_source_errors(
        self, new_topic: Callable[[int], LogTopic], opened: list[Source]
    ) -> None:
        topic = new_topic(1)
        unopened = self.source(topic, "usage")
        with pytest.raises(SourceError, match="open"):
            unopened.poll(10, 0.0)
        source, recorder = self.open(opened, topic, "usage")
        with pytest.raises(SourceError):
            source.open(recorder)
        source.close()
        source.close()  # idempotent
        with pytest.raises(SourceError, match="closed"):
            source.poll(10, 0.0)
        unopened.close()


class OffsetSourceContract(SourceContract):
    """What sources that own partitions and commit offsets promise: pausing, unread
    counts, and durable progress through their Progress."""

    def test_pause_stops_one_partition_while_polling_continues(
        self, new_topic: Callable[[int], LogTopic], opened: list[Source]
    ) -> None:
        topic = new_topic(2)
        source, recorder = member = self.open(opened, topic)
        poll_until([member], lambda: len(recorder.owned) == 2)
        paused = (topic.name, 0)
        source.pause([paused, ("some-other-topic", 0)])  # not owned: ignored
        source.pause([paused])  # idempotent
        placed = topic.produce([(f"k{i}".encode(), b"v") for i in range(40)])
        counts = per_partition(placed, 2)
        assert counts[0] > 0 and counts[1] > 0
        got = collect(member, counts[1])
        got += poll_for(member, 1.0)
        assert [m for m in got if m.partition == 0] == []
        assert len(got) == counts[1]
        source.resume([paused])
        source.resume([paused, ("some-other-topic", 0)])  # idempotent, foreign ignored
        resumed = collect(member, counts[0])
        assert {m.partition for m in resumed} == {0}
        assert [m.offset for m in resumed] == list(range(counts[0]))

    def test_unread_counts_what_poll_has_not_returned(
        self, new_topic: Callable[[int], LogTopic], opened: list[Source]
    ) -> None:
        topic = new_topic(2)
        placed = topic.produce([(f"k{i}".encode(), b"v") for i in range(60)])
        total = per_partition(placed, 2)
        source, _ = member = self.open(opened, topic)
        got = collect(member, 1)  # at least one message: the partitions have been fetched
        returned = {p: sum(1 for m in got if m.partition == p) for p in (0, 1)}
        expected = {(topic.name, p): total[p] - returned[p] for p in (0, 1)}
        deadline = time.monotonic() + WAIT_S
        while source.unread(expected) != expected and time.monotonic() < deadline:
            time.sleep(0.05)  # Kafka: both high watermarks arrive with their fetches
        assert source.unread([*expected, ("other-topic", 0)]) == expected
        got += poll_for(member, 0.5)
        assert len(got) == 60
        assert source.unread(expected) == {pid: 0 for pid in expected}

    def test_commits_through_progress_are_durable_and_seed_the_next_owner(
        self, new_topic: Callable[[int], LogTopic], opened: list[Source]
    ) -> None:
        topic = new_topic(2)
        placed = topic.produce([(f"k{i}".encode(), b"v") for i in range(40)])
        ends = per_partition(placed, 2)
        assert all(ends[p] >= 4 for p in (0, 1)), f"keys did not spread: {ends}"
        first, recorder = member = self.open(opened, topic, "owners")
        got = collect(member, len(placed))
        progress = recorder.progress
        runnable = progress.accept(sorted(got, key=lambda m: (m.partition, m.offset)))
        assert len(runnable) == len(got) and progress.counts.buffered == len(got)
        stuck = (topic.name, 0, 1)
        progress.settle([m for m in runnable if (m.topic, m.partition, m.offset) != stuck], [])
        progress.commit(list(progress.partitions))
        committed = progress.committed()
        assert committed == {(topic.name, 0): 1, (topic.name, 1): ends[1]}
        assert progress.counts.commits == 1
        first.close()
        durable = topic.committed("owners")
        assert durable[0][0] == 1 and durable[0][1] != "" and durable[1] == (ends[1], "")

        _, again = member = self.open(opened, topic, "owners")
        replayed = collect(member, ends[0] - 1)
        replayed += poll_for(member, 0.3)
        [assigned] = again.assigned
        assert {pid: (p.offset, p.metadata) for pid, p in assigned.items() if p is not None} == {
            (topic.name, 0): durable[0],
            (topic.name, 1): (ends[1], ""),
        }
        assert sorted(m.offset for m in replayed) == list(range(1, ends[0]))
        rerun = again.progress.accept(sorted(replayed, key=lambda m: m.offset))
        assert [m.offset for m in rerun] == [1], "finished offsets beyond the commit are skipped"
        assert again.progress.counts.skipped == ends[0] - 2

    def test_a_second_member_splits_the_partitions_and_revoke_commits_count(
        self, new_topic: Callable[[int], LogTopic], opened: list[Source]
    ) -> None:
        topic = new_topic(4)
        placed = topic.produce([(f"k{i}".encode(), b"v") for i in range(80)])
        first, first_rec = self.open(opened, topic, "split")
        committed_in_revoke: dict[PartitionId, CommitPosition] = {}

        def commit_revoked(partitions: Sequence[PartitionId]) -> None:
            positions = {p: CommitPosition(3, f"revoked-by-first:{p[1]}") for p in partitions}
            first.commit(positions)  # type: ignore[attr-defined]
            committed_in_revoke.update(positions)

        first_rec.on_revoke_action = commit_revoked
        collect((first, first_rec), len(placed))
        assert first_rec.owned == {(topic.name, p) for p in range(4)}
        second, second_rec = self.open(opened, topic, "split")
        overlaps: list[set[PartitionId]] = []

        def split() -> bool:
            overlaps.append(first_rec.owned & second_rec.owned)
            return bool(second_rec.owned) and len(first_rec.owned | second_rec.owned) == 4

        poll_until([(first, first_rec), (second, second_rec)], split)
        assert all(not overlap for overlap in overlaps), "a partition was owned twice"
        moved = {p for batch in first_rec.revoked for p in batch}
        assert moved and moved == second_rec.owned == set(committed_in_revoke)
        assert second_rec.assigned[-1] == committed_in_revoke
        durable = topic.committed("split")
        assert {
            (topic.name, p): CommitPosition(*durable[p]) for p in durable
        } == committed_in_revoke

    def test_a_commit_for_a_partition_not_owned_is_refused(
        self, new_topic: Callable[[int], LogTopic], opened: list[Source]
    ) -> None:
        topic = new_topic(1)
        source, recorder = member = self.open(opened, topic, "refused")
        poll_until([member], lambda: bool(recorder.owned))
        with pytest.raises(SourceError, match="not owned"):
            source.commit({(topic.name, 1): CommitPosition(0)})  # type: ignore[attr-defined]
        source.commit({(topic.name, 0): CommitPosition(0, "fits")})  # type: ignore[attr-defined]
        assert topic.committed("refused") == {0: (0, "fits")}
