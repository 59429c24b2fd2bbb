"""StopConditions: when a consumer's run ends, and how much more it may fetch."""

from __future__ import annotations

import threading
import time


class StopConditions:
    """Decides when ``run()`` returns: ``stop()`` or a signal (``stop`` is set), the
    ``max_messages``-th message handled, or nothing new for ``idle_timeout`` seconds with
    nothing buffered. Either limit may be ``None`` (no limit).

    With ``max_messages`` the consumer also fetches no more than it will handle
    (:meth:`left_to_fetch`): a poll never asks for messages beyond the limit, and once all
    that is left is fetched the loop waits for the engine rather than for the source.
    """

    def __init__(
        self, stop: threading.Event, max_messages: int | None, idle_timeout: float | None
    ) -> None:
        self._stop = stop
        self._max_messages = max_messages
        self._idle_timeout = idle_timeout
        self._last_arrival = time.monotonic()

    def arrived(self, now: float) -> None:
        """Messages (or partitions) arrived at ``now``: the idle clock starts again."""
        self._last_arrival = now

    def reached(self, handled: int, buffered: int, now: float) -> bool:
        """Whether the run should end, given messages ``handled`` and ``buffered`` now."""
        if self._stop.is_set():
            return True
        if self._max_messages is not None and handled >= self._max_messages:
            return True
        return (
            self._idle_timeout is not None
            and buffered == 0
            and now - self._last_arrival >= self._idle_timeout
        )

    def left_to_fetch(self, handled: int, buffered: int) -> int | None:
        """How many more messages may be fetched (``None``: no limit; 0: all are fetched)."""
        if self._max_messages is None:
            return None
        return max(0, self._max_messages - handled - buffered)

    def left_to_handle(self, handled: int) -> int:
        """How many messages the run still waits for (``max_messages`` must be set)."""
        assert self._max_messages is not None
        return self._max_messages - handled
