"""A hot key's backlog is contained: beyond max_buffered_per_key its messages are declined
and read again later, the other keys keep the buffer, and nothing is lost or reordered.
On the embedded log and a real Kafka broker, on every engine that buffers."""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest
import recording
from topics import SOURCES, LogTopic

import laneway


@pytest.fixture
def record_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv(recording.RECORD_DIR, str(tmp_path))
    return tmp_path


def hot_and_cold(hot: int, cold: int, cold_keys: int, seed: int = 3) -> list[tuple[bytes, bytes]]:
    """``hot`` messages of one key and ``cold`` of ``cold_keys`` others, interleaved at
    random; each 1 ms of work."""
    records = [(b"hot", b"1")] * hot + [(b"cold-%d" % (i % cold_keys), b"1") for i in range(cold)]
    random.Random(seed).shuffle(records)
    return records


@pytest.mark.parametrize("source_kind", SOURCES)
@pytest.mark.parametrize("engine", ["thread", "async", "process"])
def test_a_hot_key_is_contained_and_nothing_is_lost_or_reordered(
    engine: str,
    source_kind: str,
    record_dir: Path,
    make_topic: Callable[[str, int], LogTopic],
) -> None:
    topic = make_topic(source_kind, 4)
    records = hot_and_cold(hot=2_400, cold=1_200, cold_keys=60)
    positions = topic.produce(records)
    handler = recording.handle_async if engine == "async" else recording.handle
    consumer = laneway.Consumer(
        topic.source("hot-keys"),
        handler,
        engine=engine,  # type: ignore[arg-type]
        ordering="key",
        concurrency=2 if engine == "process" else 16,
        max_buffered=200,
        max_buffered_per_key=20,
        handle_signals=False,
    )
    rankings: list[tuple[laneway.HotKey, ...]] = []

    def watch() -> None:
        """Note every ranking (refreshed once a second) that shows a key held off."""
        while not stop.is_set():
            keys = consumer.stats().hot_keys
            if any(key.held_off for key in keys) and (not rankings or rankings[-1] != keys):
                rankings.append(keys)
            time.sleep(0.05)

    stop = threading.Event()
    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        stats = consumer.run(max_messages=len(records), idle_timeout=120)
    finally:
        stop.set()
        watcher.join(5)
    calls = recording.read_calls(record_dir)
    assert {(c.partition, c.offset) for c in calls} == set(positions), "a message was lost"
    assert recording.duplicates(calls) == 0
    assert recording.order_violations(calls, "key") == []
    assert stats.held_off > 0, "the hot key was never held off"
    # Only the hot key has more than max_buffered_per_key messages: it alone is ever held
    # off, and it tops the ranking (between two readings its lane may be nearly empty).
    assert rankings, "stats().hot_keys never showed a key held off"
    for keys in rankings:
        assert [key.key for key in keys if key.held_off] == [b"hot"], keys
    assert any(keys[0].key == b"hot" for keys in rankings), rankings
    ends = topic.end_offsets()
    committed = {p: offset for p, (offset, _) in topic.committed("hot-keys").items()}
    assert committed == ends


@pytest.mark.timing
@pytest.mark.parametrize("source_kind", SOURCES)
def test_cold_keys_are_not_paced_by_a_hot_key(
    source_kind: str, make_topic: Callable[[str, int], LogTopic]
) -> None:
    """The issue's measurement, as a check that could fail: cold keys finish long before the
    hot key's backlog, which is bounded by its own handler time (3,000 x 2 ms = 6 s)."""
    topic = make_topic(source_kind, 8)
    records: list[tuple[bytes, bytes]] = []
    for i in range(3_000):
        records += [(b"hot", b"h"), (b"cold-%d" % (i % 200), b"c")]
    topic.produce(records)
    cold_done: list[float] = []

    def handle(message: laneway.Message) -> None:
        time.sleep(0.002)
        if message.key != b"hot":
            cold_done.append(time.monotonic())

    consumer = laneway.Consumer(
        topic.source("cold-keys"),
        handle,
        engine="thread",
        concurrency=64,
        max_buffered=400,
        handle_signals=False,
    )
    thread = threading.Thread(target=consumer.run, kwargs={"idle_timeout": 60}, daemon=True)
    started = time.monotonic()
    thread.start()
    try:
        deadline = started + 60
        while len(cold_done) < 3_000 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert len(cold_done) == 3_000
        cold_seconds = max(cold_done) - started
        assert cold_seconds < 3.0, f"cold keys took {cold_seconds:.2f} s: paced by the hot key"
    finally:
        consumer.stop()
        thread.join(60)
