"""Driving an engine directly in tests: start it, collect what it reports, close it."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator

from laneway.engines.base import Completions, Engine
from laneway.types import Message


def collect(completions: Completions, expected: int, timeout: float = 30.0) -> list[Message]:
    """Finished messages until ``expected`` arrived or ``timeout`` passed (none may fail)."""
    done: list[Message] = []
    deadline = time.monotonic() + timeout
    while len(done) < expected and time.monotonic() < deadline:
        completions.wait(0.05)
        finished, failed = completions.take()
        assert not failed
        done.extend(finished)
    return done


@contextlib.contextmanager
def started(engine: Engine) -> Iterator[Completions]:
    """The engine, started with fresh completions, closed on the way out."""
    completions = Completions()
    engine.start(completions)
    try:
        yield completions
    finally:
        engine.close(5.0)
