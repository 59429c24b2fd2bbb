"""The sync engine: the plain-consumer baseline."""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Collection

from laneway.engines.base import Completions, InFlight, read_while_changing
from laneway.engines.invoker import Invoker
from laneway.types import Message, PartitionId, Waiting, waiting_of


class SyncEngine:
    """Runs the handler on each message, in fetch order, inside the polling thread.

    Every ordering mode holds trivially. Use it when the handler does almost nothing
    (well under 0.1 ms a message): there is no hand-off at all, so it is the fastest way
    to do trivial work, and the reference the other engines are measured against. A
    batch handler (``batch_size``) gets what each poll returned, in batches of up to
    ``batch_size``; ``batch_wait`` does not apply (waiting would stop the polling).
    """

    def __init__(self, invoker: Invoker, stop: threading.Event) -> None:
        self._invoker = invoker
        self._stop = stop
        self._completions: Completions | None = None
        self._running = 0
        self._unstarted: list[Message] = []
        self._run: deque[Message] = deque()
        self._slot = InFlight()

    def start(self, completions: Completions) -> None:
        self._invoker.lifecycle.open_now()
        self._completions = completions

    def submit(self, messages: list[Message]) -> None:
        assert self._completions is not None, "start() first"
        if self._invoker.batch_size is not None:
            self._submit_batches(messages, self._invoker.batch_size, self._completions)
            return
        run = self._run = deque(messages)
        self._running = 1
        try:
            self._invoker.run(run, self._stop, self._completions, self._slot)
        finally:
            self._running = 0
        self._unstarted.extend(run)

    def _submit_batches(self, messages: list[Message], size: int, completions: Completions) -> None:
        """Batch handler: the polled messages in batches of ``size`` (it does not wait for a
        later poll to fill one: that would hold up the polling thread)."""
        self._running = 1
        try:
            for start in range(0, len(messages), size):
                if self._stop.is_set():
                    self._unstarted.extend(messages[start:])
                    return
                batch = messages[start : start + size]
                left = self._invoker.run_batch(batch, self._stop, completions, self._slot)
                if left:
                    self._unstarted.extend(left)
                    self._unstarted.extend(messages[start + size :])
                    return
        finally:
            self._running = 0

    def cancel(self, partitions: Collection[PartitionId]) -> list[Message]:
        wanted = set(partitions)
        dropped = [m for m in self._unstarted if (m.topic, m.partition) in wanted]
        self._unstarted = [m for m in self._unstarted if (m.topic, m.partition) not in wanted]
        return dropped

    def waiting_behind(self, messages: list[Message]) -> list[Waiting]:
        """Everything fetched and not started waits: one message runs at a time."""
        behind = read_while_changing(lambda: waiting_of(list(self._run)), Waiting())
        return [behind for _ in messages]

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
