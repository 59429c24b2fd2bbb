"""Batch handlers (``batch_size`` / ``batch_wait``) on every engine and ordering mode.

What must hold: every message is handled, batches hold at most ``batch_size`` messages and
fill from many lanes at once, a lane's messages run in offset order (within a batch and from
batch to batch) and a lane is never in two batches at once; a failing batch is retried,
then split so that only the bad message goes to dead letters; a handler returning
``laneway.Outcomes`` fails just the messages it names.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import batch_recording
import pytest
import recording
from chaos_harness import run_bounded
from topics import EmbeddedTopic

import laneway
from laneway.config import ConsumerConfig
from laneway.engines.base import Completions, InFlight
from laneway.engines.invoker import Invoker
from laneway.retry import RetryPolicy

ENGINES = ("sync", "thread", "async", "process")
GROUP = "batches"


@pytest.fixture(autouse=True)
def record_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv(recording.RECORD_DIR, str(tmp_path))
    return tmp_path


def handler_for(engine: str, name: str) -> Callable[..., Any]:
    function: Callable[..., Any] = getattr(
        batch_recording, name + ("_async" if engine == "async" else "")
    )
    return function


def consume(
    engine: str, topic: EmbeddedTopic, handler: str, count: int, **options: Any
) -> laneway.ConsumerStats:
    consumer = laneway.Consumer(
        topic.source(GROUP),
        handler_for(engine, handler),
        engine=engine,
        concurrency=2 if engine == "process" else (None if engine == "sync" else 8),
        handle_signals=False,
        **options,
    )
    return run_bounded(consumer, count, limit=60.0)


def keyed(count: int, keys: int, bad: set[int] = frozenset()) -> list[tuple[bytes, bytes]]:  # type: ignore[assignment]
    return [(f"k{i % keys}".encode(), b"fail" if i in bad else b"v") for i in range(count)]


@pytest.mark.parametrize("ordering", ["key", "partition", "unordered"])
@pytest.mark.parametrize("engine", ENGINES)
def test_batches_fill_from_many_lanes_and_keep_lane_order(
    engine: str, ordering: str, record_dir: Path
) -> None:
    topic = EmbeddedTopic(partitions=4)
    topic.produce(keyed(2_000, keys=200))
    stats = consume(
        engine, topic, "handle", 2_000, ordering=ordering, batch_size=50, batch_wait=0.02
    )
    assert (stats.processed, stats.failed) == (2_000, 0)
    calls = batch_recording.read_batches(record_dir)
    handled = [(p, o) for call in calls for p, _, o in call.items]
    assert sorted(handled) == sorted(set(handled)) and len(handled) == 2_000
    assert max(len(call.items) for call in calls) <= 50
    assert batch_recording.lane_violations(calls, ordering) == []
    lanes_per_batch = max(len({(p, k) for p, k, _ in call.items}) for call in calls)
    assert lanes_per_batch > 1, "batches never held more than one lane"
    assert sum(len(c.items) for c in calls) / len(calls) > 10, "batches did not fill"
    assert topic.committed(GROUP) == {p: (end, "") for p, end in topic.end_offsets().items()}


@pytest.mark.parametrize("engine", ENGINES)
def test_a_bad_message_is_bisected_out_and_dead_lettered_alone(engine: str) -> None:
    topic = EmbeddedTopic(partitions=2)
    topic.produce(keyed(400, keys=20, bad={137}))
    stats = consume(engine, topic, "handle", 400, batch_size=64, max_retries=1, retry_backoff=0.01)
    assert (stats.processed, stats.failed, stats.dead_lettered) == (399, 1, 1)
    [(_, value, headers)] = topic.read("orders.dlq", 1)
    named = dict(headers)
    assert value == b"fail" and named["laneway.error.type"] == b"ValueError"
    assert topic.committed(GROUP) == {p: (end, "") for p, end in topic.end_offsets().items()}


@pytest.mark.parametrize("engine", ENGINES)
def test_outcomes_fail_only_the_messages_they_name(engine: str, record_dir: Path) -> None:
    topic = EmbeddedTopic(partitions=2)
    topic.produce(keyed(300, keys=10, bad={5, 250}))
    stats = consume(
        engine, topic, "handle_outcomes", 300, batch_size=40, max_retries=2, retry_backoff=0.01
    )
    assert (stats.processed, stats.failed, stats.dead_lettered) == (298, 2, 2)
    letters = [dict(headers) for _, _, headers in topic.read("orders.dlq", 2)]
    assert [named["laneway.attempts"] for named in letters] == [b"3", b"3"]
    bad = {
        (int(named["laneway.original.partition"]), int(named["laneway.original.offset"]))
        for named in letters
    }
    calls = batch_recording.read_batches(record_dir)
    alone = [call for call in calls if {(p, o) for p, _, o in call.items} <= bad]
    assert len(alone) >= 2, "the failed messages were not retried without the others"
    done = [(p, o) for call in calls for p, _, o in call.items if (p, o) not in bad]
    assert len(done) == len(set(done)) == 298, "a message reported done was run again"


def test_batch_wait_lets_a_trickle_fill_a_batch(record_dir: Path) -> None:
    """Messages arriving one by one within batch_wait land in one call."""
    topic = EmbeddedTopic(partitions=1)
    consumer = laneway.Consumer(
        topic.source(GROUP),
        batch_recording.handle,
        engine="thread",
        batch_size=10,
        batch_wait=1.0,
        handle_signals=False,
    )
    for i in range(10):
        topic.produce([(f"k{i}".encode(), b"v")])
    started = time.monotonic()
    run_bounded(consumer, 10)
    calls = batch_recording.read_batches(record_dir)
    assert [len(call.items) for call in calls] == [10]
    assert time.monotonic() - started < 1.0, "a full batch waited for batch_wait"


def test_batch_options_are_checked() -> None:
    with pytest.raises(laneway.ConfigError, match=r"batch_wait=0\.1 is not valid without"):
        ConsumerConfig.from_options({"batch_wait": 0.1})
    with pytest.raises(laneway.ConfigError, match="batch_size=500 is not valid with max_buffered"):
        ConsumerConfig.from_options({"batch_size": 500, "max_buffered": 100})
    with pytest.raises(laneway.ConfigError, match="batch_size=0"):
        ConsumerConfig.from_options({"batch_size": 0})
    assert ConsumerConfig.from_options({"batch_size": 8}).batch_wait == 0.05


def _sum_batch(messages: list[laneway.Message]) -> None:
    pass


def _one(message: laneway.Message) -> None:
    pass


class _Untyped:
    def __call__(self, messages):  # type: ignore[no-untyped-def]
        pass


def test_a_handler_annotated_for_the_other_shape_is_refused_at_construction() -> None:
    log = laneway.EmbeddedLog()
    log.create_topic("t", 1)
    source = log.subscribe(["t"], "g")
    with pytest.raises(
        laneway.ConfigError, match=r"takes a list of messages.*batch_size is not set"
    ):
        laneway.Consumer(source, _sum_batch)
    with pytest.raises(laneway.ConfigError, match=r"takes one Message.*batch_size is set"):
        laneway.Consumer(source, _one, batch_size=8)
    laneway.Consumer(source, _sum_batch, batch_size=8)  # the shapes agree
    laneway.Consumer(source, _Untyped(), batch_size=8)  # nothing to go by: accepted
    laneway.Consumer(source, _Untyped())


def test_bisecting_costs_about_two_calls_per_halving() -> None:
    """One bad message among 64, one retry: 2 calls on the whole batch, then both halves of
    every split down to the bad message (6 levels): 14 calls, 63 messages done. Halves run
    depth first, in order, so messages still run in offset order."""
    calls: list[int] = []

    def handler(batch: list[laneway.Message]) -> None:
        calls.append(len(batch))
        if any(m.value == b"fail" for m in batch):
            raise ValueError("bad")

    batch = [laneway.Message("t", 0, i, b"k", b"fail" if i == 41 else b"v") for i in range(64)]
    invoker = Invoker(handler, RetryPolicy(max_retries=1, backoff=0.001), batch_size=64)
    completions = Completions()
    left = invoker.run_batch(batch, threading.Event(), completions, InFlight())
    done, failed = completions.take()
    assert left == [] and len(done) == 63 and [f.message.offset for f in failed] == [41]
    assert calls == [64, 64, 32, 32, 16, 8, 8, 4, 2, 1, 1, 2, 4, 16]


def test_outcomes_of_the_wrong_length_fail_the_batch() -> None:
    def handler(batch: list[laneway.Message]) -> laneway.Outcomes:
        return laneway.Outcomes([None] * (len(batch) + 1))

    batch = [laneway.Message("t", 0, i, b"k", b"v") for i in range(3)]
    invoker = Invoker(handler, RetryPolicy(max_retries=0), batch_size=3)
    completions = Completions()
    invoker.run_batch(batch, threading.Event(), completions, InFlight())
    done, failed = completions.take()
    assert done == [] and len(failed) == 3
    assert "Outcomes for 2 messages, but its batch held 1" in failed[0].error_message
