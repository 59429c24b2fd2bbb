"""StallWatch: notices messages whose handler has been running too long, from its own thread."""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from laneway.engines.base import Engine
from laneway.options import STALL_EXIT_CODE, StallAction
from laneway.types import Message, PartitionId, Stall

log = logging.getLogger(__name__)

CHECK_EVERY = 1.0
"""Seconds between two looks at the engine's running messages (at most; a quarter of
``stall_timeout`` when that is shorter)."""


@dataclass(frozen=True)
class InFlightReport:
    """One look at what the engine runs: the age of the oldest running message overall
    and per partition (seconds), and the stalls among them."""

    oldest: float = 0.0
    oldest_by_partition: dict[PartitionId, float] = field(default_factory=dict)
    stalls: tuple[Stall, ...] = ()


class StallWatch:
    """Looks at the engine's running messages about once a second and reports each one in
    flight longer than ``timeout`` seconds as a WARNING (once per message), naming topic,
    partition, offset, key and age. :attr:`report` is the latest look, for ``stats()``
    and metrics.

    With ``action=StallAction.EXIT`` the first stall also ends the process (exit code
    :data:`~laneway.options.STALL_EXIT_CODE`, no drain: a stuck thread cannot be drained).
    It runs on its own thread because the control thread may be the one that is stuck
    (the sync engine runs handlers on it). Nothing is interrupted: a thread cannot be,
    and ``handler_timeout`` (async and process engines) is what bounds an attempt. The
    age counts from the message's first attempt, retries and backoffs included, and for
    the process engine from when the watch first saw it running (within a second).
    """

    def __init__(
        self,
        engine: Engine,
        timeout: float,
        action: StallAction = StallAction.WARN,
        exit_process: Callable[[int], object] = os._exit,
    ) -> None:
        self._engine = engine
        self._timeout = timeout
        self._action = action
        self._exit = exit_process
        self._interval = min(CHECK_EVERY, timeout / 4)
        self._warned: set[tuple[str, int, int]] = set()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.report = InFlightReport()

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="laneway-stall-watch", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(5.0)

    def look(self, now: float | None = None) -> InFlightReport:
        """Look at the engine now; warn of new stalls; keep and return the report."""
        now = time.monotonic() if now is None else now
        running = self._engine.running()
        oldest: dict[PartitionId, float] = {}
        stalls: list[Stall] = []
        for message, since in running:
            age = max(0.0, now - since)
            pid = (message.topic, message.partition)
            oldest[pid] = max(oldest.get(pid, 0.0), age)
            if age >= self._timeout:
                stalls.append(_stall(message, age))
        self._warn(stalls)
        self.report = InFlightReport(max(oldest.values(), default=0.0), oldest, tuple(stalls))
        if stalls and self._action is StallAction.EXIT:
            log.critical(
                "on_stall='exit': ending the process with exit code %d; unfinished messages "
                "are replayed by the next consumer",
                STALL_EXIT_CODE,
            )
            logging.shutdown()
            self._exit(STALL_EXIT_CODE)
        return self.report

    def _run(self) -> None:
        while not self._stop.wait(self._interval):
            self.look()

    def _warn(self, stalls: list[Stall]) -> None:
        current = {(s.topic, s.partition, s.offset) for s in stalls}
        for stall in stalls:
            where = (stall.topic, stall.partition, stall.offset)
            if where in self._warned:
                continue
            log.warning(
                "the handler has been running for %.1f s on %s[%d]@%d (key %r), longer than "
                "stall_timeout=%g s; it holds its key's lane and its partition's commit "
                "point. A thread cannot be interrupted: use handler_timeout with the async "
                "or process engine to bound an attempt",
                stall.seconds,
                stall.topic,
                stall.partition,
                stall.offset,
                stall.key,
                self._timeout,
                extra={"topic": stall.topic, "partition": stall.partition, "offset": stall.offset},
            )
        self._warned = current


def _stall(message: Message, age: float) -> Stall:
    return Stall(message.topic, message.partition, message.offset, message.key, age)
