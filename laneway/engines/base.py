"""The Engine protocol and the completion channel engines report through.

An engine accepts batches of runnable messages from the consumer's control thread,
runs the handler on them while honouring the ordering mode and ``concurrency``, and
reports finished and failed messages back in batches through :class:`Completions`.
Nothing here is per message: submit, report and wake-up all work on lists.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from typing import Protocol, TypeVar

from laneway.results import Records
from laneway.types import Failure, Message, PartitionId, Waiting

ResultGroup = tuple[list[Message], Records]
"""Messages whose handler call returned results, with those results: the messages count as
finished only once every record is written (one message, or a batch handler's batch)."""


@dataclass
class Completed:
    """Everything engines reported since the control thread last asked
    (:meth:`Completions.take_all`)."""

    finished: list[Message] = field(default_factory=list)
    """Messages done (those whose handler returned results are in :attr:`results`)."""
    failed: list[Failure] = field(default_factory=list)
    """Messages whose handler failed for good."""
    durations: list[float] = field(default_factory=list)
    """Handler seconds of the first finished messages, in their order (when timed)."""
    retries: dict[str, int] = field(default_factory=dict)
    """Retries made, per topic."""
    results: list[ResultGroup] = field(default_factory=list)
    """Messages whose handler returned results, with those results."""


class Completions:
    """A thread-safe, batch-oriented mailbox from an engine to the control thread.

    Engines call :meth:`report` with whole batches of finished and failed messages;
    the control thread calls :meth:`take` to collect everything reported so far and
    :meth:`wait` to sleep until something (or enough) is reported. A failure always wakes
    it: failures are routed (dead letters, key circuits) as soon as they happen.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._ready = threading.Event()
        self._finished: list[Message] = []
        self._failed: list[Failure] = []
        self._durations: list[float] = []
        self._retries: dict[str, int] = {}
        self._results: list[ResultGroup] = []
        self._wanted = 1
        self._woken = False

    def report(
        self,
        finished: list[Message],
        failures: list[Failure],
        durations: list[float] | None = None,
        retries: dict[str, int] | None = None,
        results: list[ResultGroup] | None = None,
    ) -> None:
        """Finished messages and failures of an engine (either may be empty), and for
        metrics the handler seconds of each finished message (in the same order; engines
        measure them only when asked) and the retries made per topic. Messages whose
        handler returned results come in ``results`` instead of ``finished``."""
        if not finished and not failures and not durations and not retries and not results:
            return
        with self._lock:
            self._finished.extend(finished)
            self._failed.extend(failures)
            if durations:
                self._durations.extend(durations)
            if retries:
                for topic, count in retries.items():
                    self._retries[topic] = self._retries.get(topic, 0) + count
            if results:
                self._results.extend(results)
            reported = len(self._finished) + len(self._failed) + len(self._results)
            enough = bool(failures) or reported >= self._wanted
        if enough:
            self._ready.set()

    def take(self) -> tuple[list[Message], list[Failure]]:
        """Finished (results included: their messages) and failed messages so far."""
        with self._lock:
            self._ready.clear()
            finished, self._finished = self._finished, []
            failed, self._failed = self._failed, []
            results, self._results = self._results, []
        for messages, _ in results:
            finished.extend(messages)
        return finished, failed

    def take_all(self) -> Completed:
        """:meth:`take`, with the handler times of the finished messages (same order), the
        retries per topic and the result groups, all reported since the last call."""
        with self._lock:
            self._ready.clear()
            taken = Completed(
                self._finished, self._failed, self._durations, self._retries, self._results
            )
            self._finished, self._failed, self._durations = [], [], []
            self._retries, self._results = {}, []
        return taken

    def wait(self, timeout: float, at_least: int = 1) -> bool:
        """Block until ``at_least`` messages are reported, :meth:`wake` is called (True),
        or ``timeout`` seconds passed. Waiting for a batch rather than the first report
        spares the control thread (and the GIL) a wake-up per finished message when it
        only needs room in the buffer."""
        with self._lock:
            reported = len(self._finished) + len(self._failed) + len(self._results)
            if self._woken or reported >= at_least:
                self._woken = False
                return True
            self._wanted = at_least
            self._ready.clear()  # set by earlier, smaller reports
        try:
            return self._ready.wait(timeout)
        finally:
            with self._lock:
                self._wanted = 1

    def wake(self) -> None:
        """Wake a :meth:`wait`er, or make the next one return at once, without reporting
        anything (used by ``stop()`` and by engines that ran dry)."""
        with self._lock:
            self._woken = True
        self._ready.set()


class InFlight:
    """What one worker (thread, coroutine) is running: ``message`` (``None``: nothing) and
    ``since``, the ``time.monotonic()`` its first attempt started. Written by the worker
    before each message, read by the stall watch from another thread (each attribute is
    read whole, so a reader sees at worst a message with its predecessor's start).
    ``report``: the worker's current run's report (a
    :class:`~laneway.engines.run_report.RunReport`), for the engine's watcher to hand
    over what the worker finished while it sits in a long call."""

    __slots__ = ("message", "report", "since")

    def __init__(self) -> None:
        self.message: Message | None = None
        self.since = 0.0
        self.report: HandOver | None = None

    def snapshot(self) -> tuple[Message, float] | None:
        message = self.message
        return None if message is None else (message, self.since)


class HandOver(Protocol):
    """What a watcher may ask of a worker's report (see :class:`InFlight`)."""

    def hand_over(self) -> int: ...


T = TypeVar("T")

READ_ATTEMPTS = 3
"""Tries at reading another thread's queues (see :func:`read_while_changing`)."""


def read_while_changing(read: Callable[[], T], otherwise: T) -> T:
    """``read()`` of queues another thread changes, for a report: a deque or dict that
    changes size while it is read raises ``RuntimeError``, and is read again, up to
    :data:`READ_ATTEMPTS` times (then ``otherwise``). Not for decisions: a snapshot."""
    for _ in range(READ_ATTEMPTS):
        try:
            return read()
        except RuntimeError:
            continue
    return otherwise


class Engine(Protocol):
    """Runs handlers on submitted messages and reports through :class:`Completions`.

    Contract for implementers:

    * ``submit`` is called from the control thread only, with messages in offset order
      per partition; it must not block on handler work.
    * Messages of one lane (see :mod:`laneway.engines.lanes`) never run at the same
      time and run in submission order.
    * At most ``concurrency`` handlers execute at once.
    * Every submitted message is eventually reported finished or failed, or returned by
      :meth:`cancel`, exactly once — unless the engine is closed first.
    """

    def start(self, completions: Completions) -> None:
        """Start workers; raise a clear error if the handler cannot run (e.g. not importable)."""

    def submit(self, messages: list[Message]) -> None:
        """Queue messages to run."""

    def cancel(self, partitions: Collection[PartitionId]) -> list[Message]:
        """Drop and return queued, not yet started messages of ``partitions``."""

    @property
    def in_flight(self) -> int:
        """Handlers executing right now."""

    def running(self) -> list[tuple[Message, float]]:
        """The messages being handled now, each with the ``time.monotonic()`` its first
        attempt started (retries included). Safe to call from any thread; for the stall
        watch, about once a second."""

    def waiting_behind(self, messages: list[Message]) -> list[Waiting]:
        """For each of ``messages`` (running now), what cannot start until it returns. For
        the stall watch, about once a second while calls are stalled; safe to call from
        any thread."""

    @property
    def worker_restarts(self) -> int:
        """Workers replaced after they died (process engine; 0 for the others)."""

    def close(self, timeout: float) -> None:
        """Stop workers, waiting up to ``timeout`` s for running handlers. Idempotent."""
