"""When a consumer's run ends (:class:`StopConditions`), how much more it may fetch, how a
shutdown runs its steps (:class:`ShutdownSteps`), and what a shutdown whose drain ended
early leaves behind (:func:`abandon`)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from laneway.engines.base import Engine
from laneway.engines.lanes import LaneOf
from laneway.errors import AccessDeniedError
from laneway.logs import get_logger
from laneway.offsets.progress import Progress
from laneway.types import Message

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


class ShutdownSteps:
    """Runs a shutdown's steps so that each runs whatever the ones before it raised: a
    Kafka member left open would keep its partitions in the group until
    ``max.poll.interval.ms``, and process workers would outlive the run.

    A refusal for good goes to ``refused`` (the caller raises it first); any other error
    is logged and kept in :attr:`failures`, for :meth:`raise_first` once all steps ran.
    """

    def __init__(self, refused: Callable[[AccessDeniedError], None]) -> None:
        self._refused = refused
        self.failures: list[BaseException] = []

    def run(self, what: str, step: Callable[[], object]) -> None:
        try:
            step()
        except AccessDeniedError as denial:
            self._refused(denial)
        except BaseException as error:  # raised once every step ran
            log.error("%s failed: %s", what, error)
            self.failures.append(error)

    def raise_first(self, denied: AccessDeniedError | None) -> None:
        if denied is not None:
            raise denied
        if self.failures:
            raise self.failures[0]


def abandon(
    progress: Progress,
    engine: Engine,
    drain_timeout: float,
    aborted: bool,
    taken_back: list[Message],
    lane_of: LaneOf | None,
) -> int:
    """After a shutdown's drain ended with work unfinished (``drain_timeout`` expired, or
    ``aborted`` by a second signal or ``stop(drain=False)``): log one ERROR naming each
    message still in its handler (topic, partition, offset and for how long; never its key
    or value, up to :data:`NAMED_AT_MOST` of them), saying that their offsets stay
    uncommitted, and why the messages the stop ``taken_back`` from the engine never
    started (those of a lane, by ``lane_of``, whose call is still running waited for it);
    return how many dispatched messages of the owned partitions were not finished (in a
    handler, held by a worker, or waiting for their dead letter or results to be
    written). They run again after a restart, as after a crash."""
    owned = progress.partitions
    unfinished = progress.running(owned)
    if not unfinished:
        return 0
    now = time.monotonic()
    in_handler = [(m, since) for m, since in engine.running() if (m.topic, m.partition) in owned]
    running = sorted((m.topic, m.partition, m.offset, now - since) for m, since in in_handler)
    named = ", ".join(f"{t}[{p}]@{o} (for {age:.1f} s)" for t, p, o, age in running[:NAMED_AT_MOST])
    why = "the drain was aborted" if aborted else f"drain_timeout={drain_timeout:g} s expired"
    detail = f"; still in their handler: {named}" if named else ""
    if len(running) > NAMED_AT_MOST:
        detail += f" and {len(running) - NAMED_AT_MOST} more"
    others = unfinished - len(running)
    if others > 0:
        detail += (
            f"; {others} more dispatched (held by a worker behind a running call, or waiting "
            "for their dead letter or results to be written)"
        )
    log.error(
        "stopped with %d message(s) unfinished: %s. Their offsets stay uncommitted (so do "
        "those after them in their partitions): they run again after a restart%s%s",
        unfinished,
        why,
        detail,
        never_started(taken_back, [m for m, _ in in_handler], lane_of),
    )
    return unfinished


def never_started(taken_back: list[Message], running: list[Message], lane_of: LaneOf | None) -> str:
    """Why the messages a stop took back from the engine never started, in words (counts
    only): those behind a call of their lane still running, and the rest, whose turn had
    not come when the stop began."""
    if not taken_back:
        return ""
    blocked = set() if lane_of is None else {lane_of(m) for m in running}
    behind = sum(1 for m in taken_back if lane_of is not None and lane_of(m) in blocked)
    text = f". The stop took back {len(taken_back)} message(s) that never started"
    if behind:
        text += f": {behind} waited behind a call above (their key's or partition's)"
        if behind < len(taken_back):
            text += f", {len(taken_back) - behind} had not had their turn"
    return text
