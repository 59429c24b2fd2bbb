"""Every engine x ordering mode, on the embedded log and on a real Kafka broker.

Each run checks the contract end to end: nothing lost, no duplicate in a fault-free
run, lane order (per key or per partition), at most ``concurrency`` handlers at once,
and committed offsets equal to the log's end offsets (read back from the broker).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from pathlib import Path

import pytest
import recording
from topics import SOURCES, LogTopic, Record

import laneway

ENGINES = ["sync", "thread", "async", "process"]
ORDERINGS = ["key", "partition", "unordered"]


@pytest.fixture
def record_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv(recording.RECORD_DIR, str(tmp_path))
    return tmp_path


def workload(count: int, keys: int, work_ms: float, seed: int = 7) -> list[Record]:
    rng = random.Random(seed)
    return [(f"key-{rng.randrange(keys)}".encode(), repr(work_ms).encode()) for _ in range(count)]


def handler_for(engine: str) -> Callable[..., object]:
    return recording.handle_async if engine == "async" else recording.handle


def concurrency_for(engine: str) -> int | None:
    return {"sync": None, "process": 2}.get(engine, 8)


@pytest.mark.parametrize("source_kind", SOURCES)
@pytest.mark.parametrize("ordering", ORDERINGS)
@pytest.mark.parametrize("engine", ENGINES)
def test_clean_run_handles_everything_once_in_order(
    engine: str,
    ordering: str,
    source_kind: str,
    record_dir: Path,
    make_topic: Callable[[str, int], LogTopic],
) -> None:
    topic = make_topic(source_kind, 4)
    records = workload(1_500, keys=40, work_ms=0.2)
    topic.produce(records)
    group = f"matrix-{engine}-{ordering}"
    consumer = laneway.Consumer(
        topic.source(group),
        handler_for(engine),
        engine=engine,
        ordering=ordering,
        concurrency=concurrency_for(engine),
        max_buffered=500,
        handle_signals=False,
    )
    stats = consumer.run(max_messages=len(records), idle_timeout=60)

    calls = recording.read_calls(record_dir)
    assert stats.processed == len(records) and stats.failed == 0
    assert len({(c.partition, c.offset) for c in calls}) == len(records), "messages lost"
    assert recording.duplicates(calls) == 0
    assert recording.order_violations(calls, ordering) == []
    limit = concurrency_for(engine) or 1
    assert recording.peak_concurrency(calls) <= limit
    ends = topic.end_offsets()
    assert {p: offset for p, (offset, _) in topic.committed(group).items()} == ends


@pytest.mark.parametrize("source_kind", SOURCES)
@pytest.mark.parametrize("engine", ["thread", "async", "process"])
def test_a_slow_key_does_not_stall_the_others(
    engine: str,
    source_kind: str,
    record_dir: Path,
    make_topic: Callable[[str, int], LogTopic],
) -> None:
    topic = make_topic(source_kind, 2)
    # The process engine detaches a worker stuck in one call after DETACH_AFTER (1 s) and
    # starts a fresh one for its other lanes: its slow call must outlast that.
    slow_ms = b"4000" if engine == "process" else b"1500"
    records: list[Record] = [(b"slow", slow_ms)]
    records += [(f"key-{i % 30}".encode(), b"1") for i in range(300)]
    topic.produce(records)
    consumer = laneway.Consumer(
        topic.source("slow-key"),
        handler_for(engine),
        engine=engine,
        ordering="key",
        concurrency=concurrency_for(engine),
        handle_signals=False,
    )
    consumer.run(max_messages=len(records), idle_timeout=60)

    calls = recording.read_calls(record_dir)
    slow = next(c for c in calls if c.key == b"slow".hex())
    others = [c for c in calls if c.key != b"slow".hex()]
    finished_meanwhile = [c for c in others if c.end < slow.end]
    assert len(finished_meanwhile) == len(others), "other keys waited for the slow one"


@pytest.mark.parametrize("source_kind", SOURCES)
@pytest.mark.parametrize("engine", ENGINES)
def test_restart_resumes_from_the_commit_without_rerunning_finished_work(
    engine: str,
    source_kind: str,
    record_dir: Path,
    make_topic: Callable[[str, int], LogTopic],
) -> None:
    topic = make_topic(source_kind, 4)
    records = workload(2_000, keys=50, work_ms=0.2)
    topic.produce(records)

    def consumer() -> laneway.Consumer:
        return laneway.Consumer(
            topic.source("restart"),
            handler_for(engine),
            engine=engine,
            concurrency=concurrency_for(engine),
            max_buffered=400,
            handle_signals=False,
        )

    first = consumer().run(max_messages=700)
    assert 700 <= first.processed < len(records)
    committed_after_first = topic.committed("restart")
    assert sum(offset for offset, _ in committed_after_first.values()) > 0

    second = consumer().run(max_messages=len(records) - first.processed, idle_timeout=30)
    calls = recording.read_calls(record_dir)
    assert len({(c.partition, c.offset) for c in calls}) == len(records)
    assert recording.duplicates(calls) == 0, "finished messages ran again after the restart"
    assert first.processed + second.processed == len(records)
    assert {p: o for p, (o, _) in topic.committed("restart").items()} == topic.end_offsets()
