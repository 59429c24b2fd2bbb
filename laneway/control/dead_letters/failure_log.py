"""FailureLog: one ERROR line per failed message, until a flood makes it a summary; records
that did not decode have lines (and a burst) of their own, so they never crowd out the
handler's failures."""

from __future__ import annotations

import time
from collections import Counter, deque
from collections.abc import Callable

from laneway.logs import get_logger
from laneway.serde.codec import DESERIALIZATION
from laneway.stats import FAILURES_KEPT, FailureNote
from laneway.types import Failure

log = get_logger("laneway.dead_letters")

BURST = 10
"""Failures logged one by one (with their traceback) per ``WINDOW``."""
WINDOW = 60.0
"""Seconds after which the failures not logged one by one are summed up in one line."""


class FailureLog:
    """Logs each final failure at ERROR, naming position, key, error and outcome, with the
    traceback; past ``burst`` failures in a ``window``, the rest are only counted and one
    summary line per window says how many there were, per topic, error type and outcome
    (a poison flood would otherwise write a line and a traceback per message). Records
    that did not decode (the handler never ran) count against a burst of their own. The
    last :data:`~laneway.stats.FAILURES_KEPT` are kept in :attr:`recent` (no key, no
    value), for ``stats().recent_failures``.

    Used from the control thread only; :meth:`flush` writes a pending summary.
    """

    def __init__(
        self,
        burst: int = BURST,
        window: float = WINDOW,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._burst = burst
        self._window = window
        self._clock = clock
        self._window_start = clock()
        self._logged: Counter[bool] = Counter()
        """Lines written one by one this window, by whether the record did not decode."""
        self._held: Counter[tuple[str, str, str]] = Counter()
        self.recent: deque[FailureNote] = deque(maxlen=FAILURES_KEPT)

    def failed(self, failure: Failure, outcome: str) -> None:
        """``failure`` was settled with ``outcome`` (e.g. ``dead-lettered to orders.dlq``)."""
        self.recent.append(FailureNote.of(failure, outcome, time.time()))
        self.tick()
        undecoded = failure.error_type == DESERIALIZATION and failure.attempts == 0
        if self._logged[undecoded] < self._burst:
            self._logged[undecoded] += 1
            _log_one(failure, outcome, undecoded)
        else:
            self._held[(failure.message.topic, failure.error_type, outcome)] += 1

    def tick(self) -> None:
        """Start a new window when the current one is over (writing its summary)."""
        now = self._clock()
        if now - self._window_start >= self._window:
            self.flush()
            self._window_start = now

    def flush(self) -> None:
        """Write the summary of the failures held back since the window began."""
        if self._held:
            parts = [f"{topic}: {kind} {n:,} ({outcome})" for (topic, kind, outcome), n in
                     self._held.most_common()]  # fmt: skip
            log.error(
                "%s more messages failed in the last %.0f s without a line each: %s",
                f"{sum(self._held.values()):,}",
                self._clock() - self._window_start,
                "; ".join(parts),
            )
            self._held.clear()
        self._logged.clear()


def _log_one(failure: Failure, outcome: str, undecoded: bool) -> None:
    m = failure.message
    if undecoded:
        text = "record %s[%d]@%d (key %r) did not decode; the handler was not called: %s; %s"
        details: tuple[object, ...] = (failure.error_message, outcome)
    else:
        text = "handler failed on %s[%d]@%d (key %r) after %d attempt(s): %s: %s; %s%s"
        trace = f"\n{failure.traceback.rstrip()}" if failure.traceback else ""
        details = (failure.attempts, failure.error_type, failure.error_message, outcome, trace)
    log.error(
        text,
        m.topic,
        m.partition,
        m.offset,
        m.key,
        *details,
        extra={"topic": m.topic, "partition": m.partition, "offset": m.offset},
    )
