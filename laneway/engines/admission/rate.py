"""A token bucket: at most ``rate`` starts a second, with a small burst allowed."""

from __future__ import annotations

BURST_SECONDS = 0.05
"""The burst a bucket allows: this many seconds' worth of tokens (at least one), so a
few starts may go back to back after a pause but no second sees much more than ``rate``."""


class TokenBucket:
    """Spaces starts ``1 / rate`` seconds apart on average, allowing a burst of
    ``max(1, rate * BURST_SECONDS)`` after an idle spell.

    :meth:`reserve` books the next start and says how long to wait for it; bookings are
    handed out in call order, so waiters start in the order they asked (no thundering
    herd, no starvation). Not thread-safe: the gate calls it under its lock. Times are
    ``time.monotonic()`` seconds, passed in so tests need no clock.
    """

    def __init__(self, rate: float) -> None:
        if rate <= 0:
            raise ValueError(f"rate={rate!r}: expected a rate above 0")
        self.rate = rate
        self._interval = 1.0 / rate
        self._credit = max(1.0, rate * BURST_SECONDS) * self._interval
        self._next: float | None = None

    def due(self, now: float) -> float:
        """Seconds until a start booked now could go (0: at once), booking nothing."""
        earliest = now - self._credit + self._interval
        booked = earliest if self._next is None or self._next < earliest else self._next
        return max(0.0, booked - now)

    def reserve(self, now: float) -> float:
        """Book one start; return the seconds to wait before it (0: start now)."""
        earliest = now - self._credit + self._interval
        booked = earliest if self._next is None or self._next < earliest else self._next
        self._next = booked + self._interval
        return max(0.0, booked - now)
