"""Stalled calls: a worker sitting in one handler call past ``stall_timeout`` is replaced.

``concurrency`` bounds the handler calls running at once, so that a downstream (a database
pool, an API's rate) sees at most that many. A call that never returns (a socket without a
timeout, a lock, a C call) would hold its place for good, and enough of them would leave no
worker for the other keys. So the thread and async engines count a call running longer than
``stall_timeout`` as *stalled*: it no longer holds a place in ``concurrency``, and a new
worker takes that place. The stalled worker goes on with its call (nothing can interrupt a
thread) and, once the call returns and it has finished what it claimed of that key, it
retires. At most :data:`REPLACED_PER_WORKER` x ``concurrency`` calls are replaced at once
(so calls that never return on more keys than ``concurrency`` leave the others workers),
never more workers than that plus ``concurrency``; past that, the stall watch's report
(``/readyz``, ``on_stall="exit"``) is what is left.
"""

from __future__ import annotations

from collections.abc import Sequence

from laneway.engines.base import InFlight

REPLACED_PER_WORKER = 2
"""How many stalled calls per place in ``concurrency`` may be replaced at once."""


class StalledCalls:
    """Which workers of an engine sit in a call past ``timeout`` seconds and were replaced.

    The engine asks :meth:`replace` from its watcher (with its own lock held, or on its
    loop) for the workers to start, and :meth:`retire` from a worker whose claim ended,
    which then exits if it was replaced. Worker indexes of retired workers are given to
    later replacements, so the engine's per-worker lists stay within ``(1 +
    REPLACED_PER_WORKER) x concurrency``. Tuning: ``stall_timeout`` (``None``: calls are
    never replaced).
    """

    def __init__(self, concurrency: int, timeout: float | None) -> None:
        self._most = REPLACED_PER_WORKER * concurrency
        self._timeout = timeout
        self._replaced: set[int] = set()
        self._spare: list[int] = []
        self._next = concurrency

    @property
    def count(self) -> int:
        """Stalled calls replaced now (their workers still run them)."""
        return len(self._replaced)

    def replace(self, slots: Sequence[InFlight], now: float) -> list[int]:
        """Mark the workers whose current call went past the timeout as replaced (as many
        as the cap allows); return the indexes the engine should start new workers at."""
        timeout = self._timeout
        if timeout is None:
            return []
        fresh: list[int] = []
        for index, slot in enumerate(slots):
            if len(self._replaced) >= self._most:
                break
            if index in self._replaced or slot.message is None:
                continue
            if now - slot.since >= timeout:
                self._replaced.add(index)
                fresh.append(self._spare.pop() if self._spare else self._take_next())
        return fresh

    def retire(self, index: int) -> bool:
        """The worker at ``index`` finished its claim: whether it must exit (it was replaced,
        and its replacement holds its place in ``concurrency``)."""
        if index not in self._replaced:
            return False
        self._replaced.discard(index)
        self._spare.append(index)
        return True

    def _take_next(self) -> int:
        index = self._next
        self._next += 1
        return index
