"""The promise "a slow key never holds up other keys" against the worst handlers, as a suite
to subclass per engine (``tests/contracts/test_misbehaving_*.py``).

Every test runs a real consumer on a real log (the embedded log, and where marked Kafka with
the classic and the KIP-848 group protocol) with :mod:`misbehaving` handlers: a call that
never returns, one 100x slower than the others, a burst of slow calls on many keys, hung
calls on more keys than ``concurrency``, Zipf keys with the hottest key hung, a hung batch
call, a hung call during a rebalance and during shutdown. Each checks that every record no
hung call blocks finishes within the engine's stated bound (:func:`adversarial.bound`, with
slack for a loaded machine), that order per lane holds, and, where a call stays hung, that
the stall report names it and what waits for it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path
from typing import ClassVar

import misbehaving
import pytest
import recording
from adversarial import (
    SLACK_S,
    SOURCES,
    STALL_TIMEOUT,
    Record,
    Run,
    Scenario,
    bound,
    keyed,
    produce,
    running,
    source_for,
    topic_for,
    unique_group,
    with_value,
    zipf,
)
from changelogs import changelog_state

import laneway
from laneway.types import Stall

HANG = misbehaving.HANG
COMMIT_INTERVAL_S = 0.5
"""The stateful case's commit interval: its changes reach the changelog by each commit."""


class MisbehavingHandlers:
    """Subclass with ``engine`` and the ``concurrencies`` to try."""

    engine: ClassVar[str]
    concurrencies: ClassVar[tuple[int, int]]
    slow_ms: ClassVar[float] = 10.0
    """The others' work in the 100x test (the slow call takes 100 times as long)."""
    burst: ClassVar[tuple[int, float]] = (12, 200.0)
    """How many keys start with a slow call in the burst test, and how slow (ms)."""

    @pytest.fixture(autouse=True)
    def record_dir(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
        monkeypatch.setenv(recording.RECORD_DIR, str(tmp_path))
        return tmp_path

    def start(
        self,
        request: pytest.FixtureRequest,
        source_kind: str,
        scenario: Scenario,
        folder: Path,
        ordering: str,
        concurrency: int,
        **options: object,
    ) -> AbstractContextManager[Run]:
        topic = topic_for(source_kind, request, scenario.partitions)
        produce(topic, scenario)
        source = source_for(source_kind, topic, unique_group(f"misbehaving-{self.engine}"))
        return running(source, scenario, folder, self.engine, ordering, concurrency, **options)

    # -- one call that never returns ------------------------------------------------------

    @pytest.mark.parametrize("ordering", ["key", "partition", "unordered"])
    @pytest.mark.parametrize("source_kind", SOURCES)
    def test_a_hung_call_holds_up_only_its_lane(
        self, request: pytest.FixtureRequest, source_kind: str, ordering: str, record_dir: Path
    ) -> None:
        concurrency = self.concurrencies[-1] if source_kind == "embedded" else self.concurrencies[0]
        scenario = Scenario(with_value(keyed(24, 6, 2.0), b"k3", HANG, nth=1))
        with self.start(request, source_kind, scenario, record_dir, ordering, concurrency) as run:
            run.wait_for_hangs(1)
            free = scenario.free(ordering)
            missing = run.wait_for(free, bound(self.engine) + SLACK_S)
            assert not missing, f"{len(missing)} records of other lanes never finished"
            calls = run.calls()
            assert recording.duplicates(calls) == 0
            assert recording.order_violations(calls, ordering) == []
            behind = len(scenario.blocked(ordering)) - 1
            stall = wait_for_stall(run.consumer, lambda s: s.waiting.messages == behind)
            hung_at = scenario.positions[scenario.hung()[0]]
            assert (stall.partition, stall.offset) == hung_at
            in_backlog = wait_for_stall(
                run.consumer,
                lambda s: s.waiting.messages == behind,
                report=lambda c: c.backlog().stalled,
            )
            assert (in_backlog.partition, in_backlog.offset) == hung_at
            if ordering == "key":
                assert stall.waiting.keys == (1 if behind else 0)
            assert not run.consumer.health().ready

    @pytest.mark.parametrize("source_kind", SOURCES)
    def test_a_hung_stateful_call_holds_up_only_its_key(
        self, request: pytest.FixtureRequest, source_kind: str, record_dir: Path
    ) -> None:
        """A handler with per-key state (a ``StateStore`` and its changelog) hung on one
        key: every other key's messages finish, their state reaches the changelog by the
        next commit (an offset is committed only once its message's state change is
        acknowledged), and the hung key's state holds what came before the hung call."""
        scenario = Scenario(with_value(keyed(24, 6, 2.0), b"k3", HANG, nth=1))
        topic = topic_for(source_kind, request, scenario.partitions)
        produce(topic, scenario)
        source = source_for(source_kind, topic, unique_group(f"stateful-{self.engine}"))
        changelog = f"{topic.name}.counts"
        store = laneway.StateStore(record_dir / "state", changelog=changelog)
        concurrency = self.concurrencies[0]
        with running(
            source, scenario, record_dir, self.engine, "key", concurrency,
            state=store, handler="handle_stateful", commit_interval=COMMIT_INTERVAL_S,
        ) as run:  # fmt: skip
            run.wait_for_hangs(1)
            missing = run.wait_for(scenario.free("key"), bound(self.engine) + SLACK_S)
            assert not missing, f"{len(missing)} records of other keys never finished"
            calls = run.calls()
            assert recording.duplicates(calls) == 0
            assert recording.order_violations(calls, "key") == []
            keys = {record.key for record in scenario.records}
            expected = {key: 1 if key == b"k3" else 6 for key in keys}
            deadline = time.monotonic() + COMMIT_INTERVAL_S + SLACK_S
            counts = changelog_state(topic, changelog)
            while counts != expected and time.monotonic() < deadline:
                time.sleep(0.1)
                counts = changelog_state(topic, changelog)
        assert counts == expected

    @pytest.mark.parametrize("ordering", ["key", "partition"])
    def test_a_hung_call_at_every_concurrency(
        self, request: pytest.FixtureRequest, ordering: str, record_dir: Path
    ) -> None:
        for concurrency in self.concurrencies:
            folder = record_dir / f"c{concurrency}"
            folder.mkdir()
            with pytest.MonkeyPatch.context() as patch:
                patch.setenv(recording.RECORD_DIR, str(folder))
                scenario = Scenario(with_value(keyed(30, 5, 1.0, seed=concurrency), b"k7", HANG))
                with self.start(
                    request, "embedded", scenario, folder, ordering, concurrency
                ) as run:
                    run.wait_for_hangs(1)
                    missing = run.wait_for(scenario.free(ordering), bound(self.engine) + SLACK_S)
                    assert not missing, f"concurrency={concurrency}: {len(missing)} never finished"
                    assert recording.order_violations(run.calls(), ordering) == []

    # -- slow, bursty, many hung, skewed ---------------------------------------------------

    @pytest.mark.timing
    def test_a_call_100x_the_others_does_not_hold_up_other_keys(
        self, request: pytest.FixtureRequest, record_dir: Path
    ) -> None:
        fast = self.slow_ms
        records = with_value(keyed(16, 2, fast), b"k2", repr(100 * fast).encode())
        scenario = Scenario(records)
        concurrency = self.concurrencies[0]
        with self.start(request, "embedded", scenario, record_dir, "key", concurrency) as run:
            missing = run.wait_for(set(scenario.positions), 100 * fast / 1000 + SLACK_S)
            assert not missing
            calls = run.calls()
            slow_at = scenario.positions[records.index(Record(b"k2", repr(100 * fast).encode()))]
            [slow] = [c for c in calls if (c.partition, c.offset) == slow_at]
            late = [
                c
                for c in calls
                if c.key != b"k2".hex() and c.end > slow.end and c.start > slow.start
            ]
            assert not late, f"{len(late)} calls of other keys waited for the slow one"
            assert recording.order_violations(calls, "key") == []

    def test_a_burst_of_slow_calls_on_many_keys(
        self, request: pytest.FixtureRequest, record_dir: Path
    ) -> None:
        slow_keys, slow_ms = self.burst
        records = keyed(24, 6, 2.0)
        for key in range(slow_keys):
            records = with_value(records, b"k%d" % (2 * key), repr(slow_ms).encode())
        scenario = Scenario(records)
        concurrency = self.concurrencies[0]
        work = (slow_keys * slow_ms + (144 - slow_keys) * 2.0) / 1000 / concurrency
        with self.start(request, "embedded", scenario, record_dir, "key", concurrency) as run:
            missing = run.wait_for(set(scenario.positions), 3 * work + bound(self.engine) + SLACK_S)
            assert not missing
            calls = run.calls()
            assert recording.duplicates(calls) == 0
            assert recording.order_violations(calls, "key") == []

    @pytest.mark.parametrize("ordering", ["key", "partition"])
    def test_hung_calls_on_more_keys_than_concurrency(
        self, request: pytest.FixtureRequest, ordering: str, record_dir: Path
    ) -> None:
        concurrency = self.concurrencies[0]
        hung = concurrency + 2
        partitions = hung + 4 if ordering == "partition" else 4
        records = keyed(hung + 12, 4, 2.0)
        for key in range(hung):
            records = with_value(records, b"k%d" % key, HANG)
        scenario = Scenario(records, partitions)
        with self.start(request, "embedded", scenario, record_dir, ordering, concurrency) as run:
            free = scenario.free(ordering)
            assert free, "the workload leaves no lane free"
            missing = run.wait_for(free, hung * (STALL_TIMEOUT + bound(self.engine)) + SLACK_S)
            assert not missing, f"{len(missing)} records of free lanes never finished"
            assert recording.order_violations(run.calls(), ordering) == []
            hanging = scenario.hanging(ordering)
            stalls = wait_for_stalls(run.consumer, len(hanging))
            assert {(s.partition, s.offset) for s in stalls} == hanging

    @pytest.mark.parametrize("source_kind", SOURCES)
    def test_a_hung_key_whose_backlog_is_larger_than_the_buffer(
        self, request: pytest.FixtureRequest, source_kind: str, record_dir: Path
    ) -> None:
        """The hung key has four times ``max_buffered`` messages behind its hung one: they
        are held off (max_buffered_per_key), not buffered, so the buffer keeps serving the
        other keys and they all finish."""
        records = keyed(30, 6, 1.0) + [Record(b"hot", b"1")] * 240
        scenario = Scenario(with_value(records, b"hot", HANG))
        concurrency = self.concurrencies[0]
        with self.start(
            request,
            source_kind,
            scenario,
            record_dir,
            "key",
            concurrency,
            max_buffered=60,
            max_buffered_per_key=10,
        ) as run:
            run.wait_for_hangs(1)
            missing = run.wait_for(scenario.free("key"), bound(self.engine) + SLACK_S)
            assert not missing, f"{len(missing)} records of other keys never finished"
            assert recording.order_violations(run.calls(), "key") == []
            # The hot key's later messages arrive in fetches of their own, maybe just after
            # the other keys finished: wait (briefly) for the first to be held off.
            deadline = time.monotonic() + 5.0
            while run.consumer.stats().held_off == 0 and time.monotonic() < deadline:
                time.sleep(0.01)
            stats = run.consumer.stats()
            assert stats.buffered <= 60 and stats.held_off > 0

    def test_zipf_keys_with_the_hottest_key_hung(
        self, request: pytest.FixtureRequest, record_dir: Path
    ) -> None:
        scenario = Scenario(with_value(zipf(600, 50, 1.0), b"k0", HANG, nth=3), partitions=8)
        concurrency = self.concurrencies[-1]
        with self.start(request, "embedded", scenario, record_dir, "key", concurrency) as run:
            run.wait_for_hangs(1)
            missing = run.wait_for(scenario.free("key"), bound(self.engine) + SLACK_S)
            assert not missing, f"{len(missing)} records of colder keys never finished"
            assert recording.order_violations(run.calls(), "key") == []
            hot_left = len(scenario.blocked("key")) - 1
            wait_for_stall(run.consumer, lambda s: s.waiting.messages == hot_left)

    def test_a_hung_batch_call_holds_up_only_the_keys_of_its_batch(
        self, request: pytest.FixtureRequest, record_dir: Path
    ) -> None:
        scenario = Scenario(with_value(keyed(40, 4, 1.0), b"k5", HANG, nth=1))
        concurrency = self.concurrencies[0]
        with self.start(
            request, "embedded", scenario, record_dir, "key", concurrency, batch=True
        ) as run:
            run.wait_for_hangs(1)
            free = scenario.free("key")
            time_left = bound(self.engine) + SLACK_S
            missing = run.wait_for(free, time_left)
            key_of = dict(zip(scenario.positions, (r.key for r in scenario.records), strict=True))
            held = {key_of[p] for p in missing}
            assert len(held) < 8, f"keys {sorted(held)} held up: more than one batch's worth"
            assert recording.order_violations(run.calls(), "key") == []

    # -- a hung call during a rebalance, and during shutdown -------------------------------

    @pytest.mark.parametrize("source_kind", SOURCES)
    def test_a_hung_call_during_a_rebalance(
        self, request: pytest.FixtureRequest, source_kind: str, record_dir: Path
    ) -> None:
        """A second member joins while a call hangs: the revocation gives up on the hung
        call after ``drain_timeout``, and every record of the other keys, written before
        and after the rebalance, finishes on one member or the other."""
        concurrency = self.concurrencies[0]
        before = with_value(keyed(24, 4, 2.0), b"k4", HANG, nth=1)
        scenario = Scenario(before)
        topic = topic_for(source_kind, request, scenario.partitions)
        produce(topic, scenario)
        group = unique_group(f"misbehaving-rebalance-{self.engine}")
        second_folder = record_dir / misbehaving.SECOND
        second_folder.mkdir()
        first_source = source_for(source_kind, topic, group)
        with running(first_source, scenario, record_dir, self.engine, "key", concurrency) as first:
            first.wait_for_hangs(1)
            second = laneway.Consumer(
                source_for(source_kind, topic, group),
                handler_for_second(self.engine),
                engine=self.engine,  # type: ignore[arg-type]
                ordering="key",
                concurrency=concurrency,
                stall_timeout=STALL_TIMEOUT,
                drain_timeout=2.0,
            )
            thread = threading.Thread(target=second.run, daemon=True)
            thread.start()
            try:
                deadline = time.monotonic() + 4 * SLACK_S
                while not second.stats().assigned and time.monotonic() < deadline:
                    time.sleep(0.05)
                assert second.stats().assigned, "the second member never got a partition"
                after = keyed(24, 4, 2.0, seed=5)
                positions = topic.produce([(r.key, r.value) for r in after])
                scenario.records += after
                scenario.positions += positions
                free = scenario.free("key")
                handled: set[tuple[int, int]] = set()
                while time.monotonic() < deadline and not free <= handled:
                    time.sleep(0.1)
                    calls = first.calls() + recording.read_calls(second_folder)
                    handled = {(c.partition, c.offset) for c in calls}
                assert free <= handled, f"{len(free - handled)} records never finished"
                for folder in (record_dir, second_folder):
                    assert recording.order_violations(recording.read_calls(folder), "key") == []
            finally:
                second.stop()
                thread.join(60)

    @pytest.mark.parametrize("source_kind", SOURCES)
    def test_a_hung_call_during_shutdown(
        self, request: pytest.FixtureRequest, source_kind: str, record_dir: Path
    ) -> None:
        concurrency = self.concurrencies[0]
        scenario = Scenario(with_value(keyed(24, 6, 2.0), b"k6", HANG, nth=2))
        topic = topic_for(source_kind, request, scenario.partitions)
        produce(topic, scenario)
        group = unique_group(f"misbehaving-shutdown-{self.engine}")
        with running(
            source_for(source_kind, topic, group),
            scenario,
            record_dir,
            self.engine,
            "key",
            concurrency,
        ) as run:
            run.wait_for_hangs(1)
            free = scenario.free("key")
            assert not run.wait_for(free, bound(self.engine) + SLACK_S)
            began = time.monotonic()
            run.consumer.stop()
            run.thread.join(30)
            stopped_in = time.monotonic() - began
            assert not run.thread.is_alive()
            drain_timeout = run.consumer.config.drain_timeout
            assert stopped_in < drain_timeout + SLACK_S
            stats = run.consumer.stats()
            assert stats.abandoned >= 1
        hung_partition, hung_offset = scenario.positions[scenario.hung()[0]]
        ends = topic.end_offsets()
        committed = {p: offset for p, (offset, _) in topic.committed(group).items()}
        for partition, end in ends.items():
            wanted = hung_offset if partition == hung_partition else end
            assert committed.get(partition) == wanted, (partition, committed, ends)


def handler_for_second(engine: str) -> Callable[..., object]:
    return misbehaving.handle_b_async if engine == "async" else misbehaving.handle_b


def wait_for_stall(
    consumer: laneway.Consumer,
    condition: Callable[[Stall], bool],
    seconds: float = SLACK_S,
    report: Callable[[laneway.Consumer], tuple[Stall, ...]] = lambda c: c.stats().stalled,
) -> Stall:
    """The consumer's one stall once ``condition(stall)`` holds for it, as ``report`` reads
    it (``stats().stalled`` unless told; ``/backlog``'s is ``c.backlog().stalled``)."""
    deadline = time.monotonic() + seconds
    stalled: tuple[Stall, ...] = ()
    while time.monotonic() < deadline:
        stalled = report(consumer)
        if len(stalled) == 1 and condition(stalled[0]):
            return stalled[0]
        time.sleep(0.1)
    raise AssertionError(f"the stall report never said it: {stalled}")


def wait_for_stalls(
    consumer: laneway.Consumer, count: int, seconds: float = SLACK_S
) -> tuple[Stall, ...]:
    """The consumer's stalls once there are ``count`` of them."""
    deadline = time.monotonic() + seconds
    stalled: tuple[Stall, ...] = ()
    while time.monotonic() < deadline:
        stalled = consumer.stats().stalled
        if len(stalled) >= count:
            return stalled
        time.sleep(0.1)
    raise AssertionError(f"{count} stalls wanted, the report has {len(stalled)}")
