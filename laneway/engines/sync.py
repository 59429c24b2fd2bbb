"""The sync engine: the plain-consumer baseline."""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Collection

from laneway.engines.base import Completions, InFlight
from laneway.engines.invoker import Invoker
from laneway.types import Message, PartitionId


class SyncEngine:
    """Runs the handler on each message, in fetch order, inside the polling thread.

    Every ordering mode holds trivially. Use it when the handler does almost nothing
    (well under 0.1 ms a message): there is no hand-off at all, so it is the fastest way
    to do trivial work, and the reference the other engines are measured against.
    """

    def __init__(self, invoker: Invoker, stop: threading.Event) -> None:
        self._invoker = invoker
        self._stop = stop
        self._completions: Completions | None = None
        self._running = 0
        self._unstarted: list[Message] = []
        self._slot = InFlight()

    def start(self, completions: Completions) -> None:
        self._invoker.lifecycle.open_now()
        self._completions = completions

    def submit(self, messages: list[Message]) -> None:
        assert self._completions is not None, "start() first"
        run = deque(messages)
        self._running = 1
        try:
            self._invoker.run(run, self._stop, self._completions, self._slot)
        finally:
            self._running = 0
        self._unstarted.extend(run)

    def cancel(self, partitions: Collection[PartitionId]) -> list[Message]:
        wanted = set(partitions)
        dropped = [m for m in self._unstarted if (m.topic, m.partition) in wanted]
        self._unstarted = [m for m in self._unstarted if (m.topic, m.partition) not in wanted]
        return dropped

    @property
    def worker_restarts(self) -> int:
        return 0

    @property
    def in_flight(self) -> int:
        return self._running

    def running(self) -> list[tuple[Message, float]]:
        item = self._slot.snapshot()
        return [] if item is None else [item]

    def close(self, timeout: float) -> None:
        if self._completions is not None:
            self._completions = None
            self._invoker.lifecycle.close_now()
