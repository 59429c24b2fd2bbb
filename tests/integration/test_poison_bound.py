"""``poison_threshold`` holds on every engine: a key whose every message fails costs at most
``threshold * (1 + max_retries)`` handler calls, however many of its messages wait, and
its circuit's opening is one WARNING, not one per message.

Handlers are module-level so process-engine workers can import them by name; each call
appends a line to the file named by ``POISON_CALLS`` (workers inherit the environment).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from pathlib import Path

import pytest
from topics import EmbeddedTopic

import laneway
from laneway.results import Outcomes
from laneway.types import Message

CALLS = "POISON_CALLS"
ENGINES = ["sync", "thread", "async", "process"]
THRESHOLD = 2
POISONED = 100


def _count_call(key: bytes | None) -> None:
    fd = os.open(os.environ[CALLS], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, (key or b"-") + b"\n")
    finally:
        os.close(fd)


def fails_for_poison(message: Message) -> None:
    _count_call(message.key)
    if message.key == b"poison":
        raise ValueError("cannot parse")


async def fails_for_poison_async(message: Message) -> None:
    fails_for_poison(message)


def batch_fails_for_poison(messages: list[Message]) -> Outcomes:
    for message in messages:
        _count_call(message.key)
    return Outcomes([ValueError("bad") if m.key == b"poison" else None for m in messages])


async def batch_fails_for_poison_async(messages: list[Message]) -> Outcomes:
    return batch_fails_for_poison(messages)


@pytest.fixture
def calls(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Callable[[], list[bytes]]:
    path = tmp_path / "calls"
    monkeypatch.setenv(CALLS, str(path))
    return lambda: path.read_bytes().split() if path.exists() else []


def circuit_warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    """The WARNINGs that a key's circuit opened (each message is an ERROR of its own)."""
    return [
        r.getMessage()
        for r in caplog.records
        if r.levelno == logging.WARNING and "circuit is open" in r.getMessage()
    ]


@pytest.mark.parametrize("max_retries", [0, 3])
@pytest.mark.parametrize("engine", ENGINES)
def test_a_poison_key_runs_at_most_threshold_times_its_attempts(
    engine: str,
    max_retries: int,
    calls: Callable[[], list[bytes]],
    caplog: pytest.LogCaptureFixture,
) -> None:
    topic = EmbeddedTopic(partitions=1)
    topic.produce([(b"poison", b"x")] * POISONED + [(b"fine", b"x")] * 10)
    with caplog.at_level(logging.WARNING, logger="laneway"):
        stats = laneway.Consumer(
            topic.source("g"),
            fails_for_poison_async if engine == "async" else fails_for_poison,
            engine=engine,
            concurrency=None if engine == "sync" else 2,
            poison_threshold=THRESHOLD,
            max_retries=max_retries,
            retry_backoff=0.001,
            retry_backoff_max=0.002,
            handle_signals=False,
        ).run(max_messages=POISONED + 10, idle_timeout=30)
    made = calls()
    assert made.count(b"poison") == THRESHOLD * (1 + max_retries), "ran past the threshold"
    assert made.count(b"fine") == 10
    assert (stats.failed, stats.dead_lettered, stats.processed) == (POISONED, POISONED, 10)
    [opened] = circuit_warnings(caplog)  # told once
    assert opened.startswith("the key of orders[0]@") and "poison" not in opened, opened
    letters = [dict(headers) for _, _, headers in topic.read("orders.dlq", POISONED)]
    kinds = sorted(named["laneway.error.type"] for named in letters)
    assert kinds == [b"CircuitOpen"] * (POISONED - THRESHOLD) + [b"ValueError"] * THRESHOLD


@pytest.mark.parametrize("engine", ENGINES)
def test_a_batch_handler_s_poison_key_stops_at_the_threshold(
    engine: str, calls: Callable[[], list[bytes]]
) -> None:
    topic = EmbeddedTopic(partitions=1)
    topic.produce([(b"poison", b"x")] * POISONED)
    stats = laneway.Consumer(
        topic.source("g"),
        batch_fails_for_poison_async if engine == "async" else batch_fails_for_poison,
        engine=engine,
        batch_size=1,
        poison_threshold=THRESHOLD,
        max_retries=1,
        retry_backoff=0.001,
        handle_signals=False,
    ).run(max_messages=POISONED, idle_timeout=30)
    assert calls().count(b"poison") == THRESHOLD * 2
    assert stats.failed == POISONED
