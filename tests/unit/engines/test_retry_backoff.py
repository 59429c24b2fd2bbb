"""Async retry backoff: the drawn delay is a minimum, on uvloop too."""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Callable, Coroutine
from typing import Any

import pytest
import uvloop

from laneway.retry import sleep_at_least

Runner = Callable[[Coroutine[Any, Any, int]], int]


@pytest.mark.parametrize("run", [asyncio.run, uvloop.run], ids=["asyncio", "uvloop"])
def test_sleep_at_least_never_returns_early(run: Runner) -> None:
    # uvloop's millisecond timers end a plain asyncio.sleep early about a third of the time.
    draws = random.Random(7)

    async def count_early() -> int:
        early = 0
        for _ in range(150):
            seconds = draws.uniform(0.001, 0.01)
            started = time.monotonic()
            await sleep_at_least(seconds)
            if time.monotonic() - started < seconds:
                early += 1
        return early

    assert run(count_early()) == 0
