"""When a consumer's run ends (:class:`StopConditions`), how much more it may fetch, and
what a shutdown whose drain ended early leaves behind (:func:`abandon`)."""

from __future__ import annotations

import threading
import time

from laneway.engines.base import Engine
from laneway.logs import get_logger
from laneway.offsets.progress import Progress

log = get_logger(__name__)

NAMED_AT_MOST = 100
"""How many running messages the abandonment ERROR names (the others are counted)."""


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


def abandon(progress: Progress, engine: Engine, drain_timeout: float, aborted: bool) -> int:
    """After a shutdown's drain ended with work unfinished (``drain_timeout`` expired, or
    ``aborted`` by a second signal or ``stop(drain=False)``): log one ERROR naming each
    message still in its handler (topic, partition, offset and for how long; never its key
    or value, up to :data:`NAMED_AT_MOST` of them) and saying that their offsets stay
    uncommitted; return how many dispatched messages of the owned partitions were not
    finished (in a handler, queued for a worker, or waiting for their dead letter or
    results to be written). They run again after a restart, as after a crash."""
    owned = progress.partitions
    unfinished = progress.running(owned)
    if not unfinished:
        return 0
    now = time.monotonic()
    running = sorted(
        (message.topic, message.partition, message.offset, now - since)
        for message, since in engine.running()
        if (message.topic, message.partition) in owned
    )
    named = ", ".join(f"{t}[{p}]@{o} (for {age:.1f} s)" for t, p, o, age in running[:NAMED_AT_MOST])
    why = "the drain was aborted" if aborted else f"drain_timeout={drain_timeout:g} s expired"
    detail = f"; still in their handler: {named}" if named else ""
    if len(running) > NAMED_AT_MOST:
        detail += f" and {len(running) - NAMED_AT_MOST} more"
    others = unfinished - len(running)
    if others > 0:
        detail += (
            f"; {others} more dispatched (queued for a worker, or waiting for their dead "
            "letter or results to be written)"
        )
    log.error(
        "stopped with %d message(s) unfinished: %s. Their offsets stay uncommitted (so do "
        "those after them in their partitions): they run again after a restart%s",
        unfinished,
        why,
        detail,
    )
    return unfinished
