"""DrainRate: how fast the engine finishes messages, to tell a slow consumer from a fast one."""

from __future__ import annotations

WINDOW = 0.05
"""Seconds of completions one rate figure covers (the latest full window is reported)."""
WARM_UP = 0.002
"""Seconds after the first message before any rate is reported."""


class DrainRate:
    """Messages finished per second over the latest ``WINDOW``, fed by the control plane.

    Until the first window is complete the average since the first message is used, so a
    rate exists a few milliseconds into a run. Used to decide whether a partition that has
    nothing buffered is worth a pause of the others (a Kafka pause costs a refetch): a
    consumer that drains its buffer within moments reaches that partition's messages
    anyway.
    """

    def __init__(self) -> None:
        self._started: float | None = None
        self._finished = 0
        self._mark = (0.0, 0)
        self._rate: float | None = None

    def started(self, now: float) -> None:
        """The first message arrived at ``now`` (later calls are ignored)."""
        if self._started is None:
            self._started = now
            self._mark = (now, 0)

    def finished(self, count: int, now: float) -> None:
        """``count`` more messages finished by ``now``."""
        self._finished += count
        since, done = self._mark
        if now - since >= WINDOW:
            self._rate = (self._finished - done) / (now - since)
            self._mark = (now, self._finished)

    def per_second(self, now: float) -> float | None:
        """The latest rate; ``None`` before ``WARM_UP`` has passed since the first message."""
        if self._rate is not None:
            return self._rate
        if self._started is None or now - self._started < WARM_UP:
            return None
        return self._finished / (now - self._started)
