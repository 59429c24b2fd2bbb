"""A state restore's progress shows while it lasts: in ``stats().restoring``, in the
``restoring`` list of ``/readyz`` (which stays ready: the other partitions run) and in the
``laneway_state_restor*`` gauges; all of it empties once the partition is restored.

The restore reads the real changelog (embedded log and Kafka); the test only holds the
second partition's restore after its first 50 records, to look at it half-way, or fails a
restore's first attempt, to see it shown while it waits to restore again.
"""

from __future__ import annotations

import json
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import state_handlers
from chaos_harness import run_bounded
from metrics_recorder import Recorder
from topics import SOURCES, LogTopic

import laneway
from laneway.metrics import Metric
from laneway.service.health_server import HealthServer
from laneway.state.changelog import Changed, EmbeddedChangelog
from laneway.status.member import MemberStatus

KEYS = 1_000
"""More keys than any test writes messages: every message changes a key of its own, so the
changelog holds one record per message (the writer merges only a key's changes) and its
length is known."""
PIECE = 50
"""Records the held restore reads before it is held."""


class HeldRestore:
    """Wraps a changelog's ``read``: batches come in pieces of :data:`PIECE` records, and the
    second partition restored stops after its first piece until :attr:`release` is set."""

    def __init__(self, read: Callable[..., Iterator[list[Changed]]]) -> None:
        self._read = read
        self.reads: list[int] = []
        self.release = threading.Event()

    def __call__(
        self, log: Any, topic: str, partition: int, start: int, end: int
    ) -> Iterator[list[Changed]]:
        self.reads.append(partition)
        held = len(self.reads) == 2
        for batch in self._read(log, topic, partition, start, end):
            for at in range(0, len(batch), PIECE):
                yield batch[at : at + PIECE]
                if held:
                    assert self.release.wait(60.0), "the test never released the restore"
                    held = False


def inputs(count: int, start: int = 0) -> list[tuple[bytes, bytes]]:
    return [(f"k{i % KEYS}".encode(), b"1") for i in range(start, start + count)]


def wait_for(what: str, check: Callable[[], bool], limit: float = 30.0) -> None:
    deadline = time.monotonic() + limit
    while not check():
        assert time.monotonic() < deadline, f"not seen in {limit:g} s: {what}"
        time.sleep(0.05)


def get_json(port: int, path: str) -> tuple[int, dict[str, Any]]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as answer:
        return answer.status, json.loads(answer.read())


def consumer(topic: LogTopic, store: laneway.StateStore, **options: Any) -> laneway.Consumer:
    return laneway.Consumer(
        topic.source("counters"),
        state_handlers.count,
        state=store,
        engine="thread",
        concurrency=8,
        handle_signals=False,
        commit_interval=0.2,
        **options,
    )


@pytest.mark.parametrize("kind", SOURCES)
def test_a_restore_shows_its_progress_until_it_is_done(
    make_topic: Any, kind: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    topic = make_topic(kind, 2)
    first = inputs(800)
    topic.produce(first)
    changelog = f"{topic.name}.counts"
    run_bounded(consumer(topic, laneway.StateStore(tmp_path / "a", changelog=changelog)), 800)

    if kind == "embedded":
        owner: Any = EmbeddedChangelog
    else:
        from laneway.state.kafka_changelog import KafkaChangelog

        owner = KafkaChangelog
    held = HeldRestore(owner.read)
    monkeypatch.setattr(owner, "read", lambda log, *where: held(log, *where))
    second = inputs(200, start=800)
    placed = topic.produce(second)
    metrics = Recorder()
    # A fresh directory: both partitions restore in full, one after the other.
    again = consumer(
        topic, laneway.StateStore(tmp_path / "b", changelog=changelog), metrics=metrics
    )
    probes = HealthServer(again.health, 0, status=MemberStatus(again, source="test"))
    probes.start()
    outcome: list[Any] = []
    runner = threading.Thread(target=lambda: outcome.append(run_bounded(again, len(second), 90.0)))
    runner.start()
    try:
        wait_for("a partition held", lambda: len(held.reads) == 2)
        slow = held.reads[1]
        wait_for(
            "the held restore's first piece",
            lambda: [r.records for r in again.stats().restoring] == [PIECE],
        )
        [restore] = again.stats().restoring
        assert (restore.topic, restore.partition) == (topic.name, slow)
        assert 0 < restore.records <= restore.total and restore.full
        assert restore.remaining == restore.total - PIECE > 0
        # The other partition runs meanwhile: its new messages are all processed.
        others = sum(1 for partition, _ in placed if partition != slow)
        wait_for(f"{others} others processed", lambda: again.stats().processed == others)

        status, body = get_json(probes.port, "/readyz")
        assert status == 200 and body["ready"] is True
        [shown] = body["restoring"]
        assert shown["topic"] == topic.name and shown["partition"] == slow
        assert (shown["records"], shown["total"], shown["full"]) == (
            PIECE,
            restore.total,
            True,
        )
        assert shown["seconds"] > 0
        [listed] = get_json(probes.port, "/status.json")[1]["lists"]["restoring"]["entries"]
        assert (listed["topic"], listed["partition"], listed["records"]) == (
            topic.name,
            slow,
            PIECE,
        )
        assert (listed["total"], listed["full"]) == (restore.total, True)

        remaining = (Metric.STATE_RESTORE_REMAINING, (topic.name, str(slow)))
        wait_for("the restore's gauges", lambda: metrics.gauges.get(remaining) == restore.remaining)
        assert metrics.gauges[(Metric.STATE_RESTORING, ())] == 1
    finally:
        held.release.set()
        runner.join(120.0)
        probes.stop()
    [stats] = outcome
    assert stats.processed == len(second)
    assert stats.restoring == () and again.stats().restoring == ()
    assert again.health().as_json()["restoring"] == []
    assert MemberStatus(again).document()["lists"]["restoring"]["entries"] == []
    assert metrics.gauges[(Metric.STATE_RESTORING, ())] == 0
    assert metrics.gauges[remaining] == 0


def test_a_failed_restore_still_shows_while_it_waits_to_restore_again(
    make_topic: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    topic = make_topic("embedded", 1)
    topic.produce(inputs(300))
    changelog = f"{topic.name}.counts"
    run_bounded(consumer(topic, laneway.StateStore(tmp_path / "a", changelog=changelog)), 300)

    real = EmbeddedChangelog.read
    reads: list[float] = []

    def failing_once(log: Any, *where: Any) -> Iterator[list[Changed]]:
        reads.append(time.monotonic())
        if len(reads) == 1:
            raise OSError("the changelog is unreachable (a test)")
        return real(log, *where)

    monkeypatch.setattr(EmbeddedChangelog, "read", failing_once)
    topic.produce(inputs(50, start=300))
    again = consumer(topic, laneway.StateStore(tmp_path / "b", changelog=changelog))
    outcome: list[Any] = []
    runner = threading.Thread(target=lambda: outcome.append(run_bounded(again, 50, 60.0)))
    runner.start()
    try:
        wait_for("the failed first attempt", lambda: len(reads) == 1)
        # Between the failure and the second attempt (RETRY_AFTER later) it still shows.
        time.sleep(0.5)
        assert len(reads) == 1
        [restore] = again.stats().restoring
        assert (restore.topic, restore.partition, restore.full) == (topic.name, 0, True)
        assert restore.total == 300 and restore.records == 0 and restore.remaining == 300
    finally:
        runner.join(60.0)
    [stats] = outcome
    assert len(reads) == 2 and stats.processed == 50
    assert stats.restoring == ()
