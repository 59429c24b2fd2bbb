"""An adaptive concurrency limit: as many handlers at once as the downstream serves without
queueing, found from the handlers' latency and errors (``concurrency_limit="adaptive"``).

The idea is Little's law: while a database (or any service) keeps up, running more calls
at once raises throughput and leaves each call's latency where it was; once it is
saturated, more calls only queue inside it, and latency grows with every one added. So
the limit watches latency against a baseline and follows a *gradient*:

* Completions are taken in windows of about one round of the limit (``max(MIN_WINDOW,
  limit)`` completions). A window's mean latency is compared with the *baseline*, a slow
  average of past windows that drops at once to any faster window (the latency the
  downstream shows when it is not queueing).
* ``gradient = clamp(TOLERANCE * baseline / latency, 0.5, 1)``: 1 while latency stays
  within ``TOLERANCE`` times the baseline, below 1 as it grows past that.
* The new limit is ``limit * gradient``, plus headroom when latency held (gradient 1) and
  the window kept the limit busy (at least half of it in use): it shrinks by up to half
  per round as the downstream queues, and grows while latency holds — doubling per round
  at first (*slow start*, from 1, as TCP does), by about the square root of itself per
  round once it has had to shrink. A limit that was not used does not grow.
* Starting from one call in flight makes the first window's latency a true no-load
  baseline, however loaded the downstream is when the consumer starts.
* An attempt that failed (the handler raised, or ran past ``handler_timeout``) cuts the
  limit by ``BACKOFF`` at once, at most once per window: errors under load are the
  downstream shedding it.
* The baseline rises only from *quiet* windows, with ``QUIET`` call in flight at most
  (there is nothing to queue behind), by ``DRIFT`` of the difference each: a downstream
  that got durably slower drives the limit down to one call, where its new
  no-load latency is learnt, and then lets it grow back; one that is merely overloaded
  cannot talk the baseline up while the queue is there.

The limit stays within ``[1, maximum]`` (``maximum`` is the consumer's ``concurrency``);
it starts at ``INITIAL``. Not thread-safe: the gate calls it under its lock.
"""

from __future__ import annotations

import math

INITIAL = 1
"""The limit before anything is measured."""
MIN_WINDOW = 8
"""Completions a window needs at the least, so one slow call does not decide."""
TOLERANCE = 2.0
"""How many times the baseline latency a window may take before the limit shrinks."""
BACKOFF = 0.75
"""The factor a failed attempt cuts the limit by."""
DRIFT = 0.2
"""How far the baseline moves towards a slower quiet window's latency, per window."""
QUIET = 1
"""Calls in flight at most for a window to count as quiet (to teach the baseline): with
more, a call may have waited for another inside the downstream."""


class AdaptiveLimit:
    """The concurrency limit between 1 and ``maximum`` (see the module docstring).

    Feed it every finished attempt with :meth:`sample`; read :attr:`limit` (a float; the
    gate admits while fewer than ``max(1, int(limit))`` handlers run).
    """

    def __init__(self, maximum: int) -> None:
        if maximum < 1:
            raise ValueError(f"maximum={maximum!r}: expected at least 1")
        self.maximum = maximum
        self.limit = float(min(maximum, INITIAL))
        self.baseline: float | None = None
        """The no-queueing latency estimate in seconds (None until the first window)."""
        self._total = 0.0
        self._succeeded = 0
        self._count = 0
        self._busiest = 0
        self._cut = False
        self._slow_start = True

    @property
    def admits(self) -> int:
        """How many handlers may run at once now."""
        return max(1, int(self.limit))

    def sample(self, latency: float, failed: bool, running: int) -> None:
        """One attempt finished after ``latency`` seconds (``failed``: it raised), with
        ``running`` attempts in flight when it ended (itself included)."""
        self._count += 1
        self._busiest = max(self._busiest, running)
        if failed:
            if not self._cut:
                self.limit = max(1.0, self.limit * BACKOFF)
                self._cut = True
        else:
            self._total += latency
            self._succeeded += 1
        if self._count >= max(MIN_WINDOW, self.admits):
            self._close_window()

    def _close_window(self) -> None:
        """A window is complete: follow the gradient, unless it was cut for a failure."""
        if self._cut:
            self._slow_start = False
        elif self._succeeded:
            latency = self._total / self._succeeded
            baseline = self.baseline
            if baseline is None or latency < baseline:
                baseline = latency
            elif self._busiest <= QUIET:
                baseline += (latency - baseline) * DRIFT
            self.baseline = baseline
            gradient = 1.0 if latency <= 0 else max(0.5, min(1.0, TOLERANCE * baseline / latency))
            limit = self.limit * gradient
            if gradient < 1.0:
                self._slow_start = False
            elif self._busiest * 2 >= self.admits:  # used, and not queueing: grow
                limit += self.limit if self._slow_start else math.sqrt(self.limit)
            self.limit = max(1.0, min(float(self.maximum), limit))
        self._total, self._succeeded, self._count, self._busiest = 0.0, 0, 0, 0
        self._cut = False
