"""Attempt hooks wrap every handler attempt, retries included, on every engine."""

from __future__ import annotations

import threading
from collections import Counter
from pathlib import Path

import process_handlers
import pytest
from engine_runs import started

from laneway.config import ConsumerConfig
from laneway.engines.factory import build_engine
from laneway.types import Message


@pytest.mark.parametrize("engine", ["sync", "thread", "async", "process"])
def test_hooks_see_every_attempt_and_its_outcome(engine: str, tmp_path: Path) -> None:
    config = ConsumerConfig.from_options(
        {"engine": engine, "concurrency": 2 if engine != "sync" else None, "retry_backoff": 0.001}
    )
    handler = (
        process_handlers.fail_first_two_attempts_async
        if engine == "async"
        else process_handlers.fail_first_two_attempts
    )
    hook = process_handlers.CountAttempts(str(tmp_path / "attempts"))
    # A topic per engine: fail_first_two_attempts counts attempts per process and position.
    messages = [Message(f"t-{engine}", 0, offset, b"k%d" % offset, b"") for offset in range(5)]
    built = build_engine(config, handler, threading.Event(), hooks=[hook])
    with started(built) as completions:
        built.submit(messages)
        done: list[Message] = []
        for _ in range(200):
            completions.wait(0.05)
            finished, failed = completions.take()
            assert not failed
            done.extend(finished)
            if len(done) == len(messages):
                break
    assert sorted(m.offset for m in done) == list(range(5))
    seen: Counter[tuple[int, str]] = Counter()
    for path in tmp_path.glob("attempts.*"):
        for line in path.read_text().splitlines():
            offset, outcome = line.split()
            seen[(int(offset), outcome)] += 1
    assert seen == Counter(
        {**{(o, "raised"): 2 for o in range(5)}, **{(o, "returned"): 1 for o in range(5)}}
    )
