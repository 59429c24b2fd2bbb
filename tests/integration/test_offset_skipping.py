"""Finished offsets beyond the commit point: stored in the metadata, skipped on restart,
and never allowed to outgrow the metadata cap."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import pytest
from topics import SOURCES, LogTopic

import laneway
from laneway.offsets.codec import decode, max_span
from laneway.types import Message


@pytest.mark.parametrize("source_kind", SOURCES)
@pytest.mark.parametrize("engine", ["thread", "async"])
def test_a_restart_skips_what_finished_beyond_the_commit_point(
    engine: str, source_kind: str, make_topic: Callable[[str, int], LogTopic]
) -> None:
    topic = make_topic(source_kind, 1)
    topic.produce([(f"k{i}".encode(), b"v") for i in range(100)])
    gate = threading.Event()
    first_run: list[int] = []

    def stuck_at_zero(m: Message) -> None:
        if m.offset == 0:
            gate.wait(30)
        first_run.append(m.offset)

    async def stuck_at_zero_async(m: Message) -> None:
        if m.offset == 0:
            while not gate.is_set():
                await _sleep(0.01)
        first_run.append(m.offset)

    first = laneway.Consumer(
        topic.source("g"),
        stuck_at_zero_async if engine == "async" else stuck_at_zero,
        engine=engine,
        ordering="unordered",
        concurrency=4,
        drain_timeout=0.3,
        handle_signals=False,
    )
    stats = first.run(max_messages=99)
    gate.set()
    assert stats.processed == 99
    [(offset, metadata)] = topic.committed("g").values()
    assert offset == 0, "committed past the unfinished offset 0"
    assert decode(metadata, 0) == frozenset(range(1, 100))

    second_run: list[int] = []
    restarted = laneway.Consumer(
        topic.source("g"),
        lambda m: second_run.append(m.offset),
        engine="sync",
        handle_signals=False,
    ).run(idle_timeout=1.5)
    assert second_run == [0], "finished offsets were run again instead of skipped"
    assert restarted.skipped == 99
    assert [o for o, _ in topic.committed("g").values()] == [100]


async def _sleep(seconds: float) -> None:
    import asyncio

    await asyncio.sleep(seconds)


@pytest.mark.parametrize("source_kind", SOURCES)
def test_dispatch_holds_back_near_the_metadata_cap_instead_of_dropping_the_map(
    source_kind: str, make_topic: Callable[[str, int], LogTopic]
) -> None:
    cap = 100
    span = max_span(cap)
    topic = make_topic(source_kind, 1)
    total = span * 3
    topic.produce([(f"k{i}".encode(), b"v") for i in range(total)])
    gate = threading.Event()
    started: list[int] = []
    metadata_sizes: list[int] = []
    started_while_stuck: list[int] = []

    def handle(m: Message) -> None:
        started.append(m.offset)
        if m.offset == 0:
            gate.wait(30)

    consumer = laneway.Consumer(
        topic.source("g"),
        handle,
        engine="thread",
        ordering="unordered",
        concurrency=4,
        metadata_max_bytes=cap,
        commit_interval=0.05,
        handle_signals=False,
    )

    def watch_then_release() -> None:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and len(started) < span:
            time.sleep(0.01)
        time.sleep(0.5)
        for _, metadata in topic.committed("g").values():
            metadata_sizes.append(len(metadata.encode()))
        started_while_stuck.extend(started)
        gate.set()

    watcher = threading.Thread(target=watch_then_release)
    watcher.start()
    stats = consumer.run(max_messages=total, idle_timeout=30)
    watcher.join()
    assert max(started_while_stuck) == span, "dispatched beyond what the metadata can hold"
    assert sorted(started_while_stuck) == list(range(span + 1)), "held back more than needed"
    assert metadata_sizes and max(metadata_sizes) <= cap
    assert stats.processed == total
    assert [o for o, _ in topic.committed("g").values()] == [total]
