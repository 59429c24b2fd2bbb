"""Thread and async engines: what they promise beyond the Engine contract.

The promises every engine makes (order, concurrency, failures, cancel, hooks, close) are
tested for all four engines in ``test_engine_contract.py``.
"""

from __future__ import annotations

import asyncio
import threading
import time

import pytest
from engine_runs import collect

from laneway.engines.async_engine import AsyncEngine
from laneway.engines.base import Completions, Engine
from laneway.engines.invoker import Invoker
from laneway.engines.thread import ThreadEngine
from laneway.options import Ordering
from laneway.retry import RetryPolicy
from laneway.types import Message

ONCE = RetryPolicy(max_retries=0)


@pytest.mark.parametrize("kind", ["thread", "async"])
def test_finished_messages_are_reported_while_their_run_goes_on(kind: str) -> None:
    # One lane: one worker claims the whole run. Message 5 outlasts REPORT_EVERY and
    # message 10 blocks until the gate opens; 0..5 must be reported before that, so the
    # control plane can free buffer room and commit them while the lane is still busy.
    gate = threading.Event()

    def pace(m: Message) -> float:
        return 0.02 if m.offset == 5 else 0.0

    engine: Engine
    if kind == "async":

        async def handle_async(m: Message) -> None:
            await asyncio.sleep(pace(m))
            if m.offset == 10:
                while not gate.is_set():
                    await asyncio.sleep(0.01)

        engine = AsyncEngine(Invoker(handle_async, ONCE, is_async=True), Ordering.KEY, 4)
    else:

        def handle(m: Message) -> None:
            time.sleep(pace(m))
            if m.offset == 10:
                gate.wait(10)

        engine = ThreadEngine(Invoker(handle, ONCE), Ordering.KEY, 4)
    completions = Completions()
    engine.start(completions)
    engine.submit([Message("t", 0, i, b"k", b"") for i in range(20)])
    early = collect(completions, 6, timeout=10)
    assert engine.in_flight == 1, "the run should still be blocked at offset 10"
    gate.set()
    rest = collect(completions, 20 - len(early))
    engine.close(5.0)
    assert [m.offset for m in early][:6] == [0, 1, 2, 3, 4, 5]
    assert len(early) <= 10
    assert sorted(m.offset for m in early + rest) == list(range(20))
