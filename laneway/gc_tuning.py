"""Python's garbage collector, sized for a running consumer's buffer (``tune_gc``).

Python runs a collection of its youngest generation every 700 net allocations of
container objects, and every tenth of those also walks the next generation. A consumer
keeps up to ``max_buffered`` messages alive for milliseconds each (with handler results,
also their records, until the log acknowledges them): with the default threshold a
collection runs every few hundred messages and walks the whole buffer, which then moves
to the older generations and is walked again there. None of it is garbage; the buffer is
freed by reference counting when its messages finish.

While :func:`sized_for` is entered, the youngest generation's threshold is raised to
:data:`OBJECTS_PER_MESSAGE` objects per buffered message (at most :data:`MOST_OBJECTS`),
so that a collection runs about once per buffer's worth of messages instead. Measured
with ``max_buffered=10000`` on the trivial transform, 500,000 messages, Kafka: the
collector's time per run fell from 0.33-1.05 s (thread and sync engines, with results) to
0.00-0.01 s, i.e. 10-20% of the process's CPU.

It is process-wide, so it is polite about it: a threshold already at least as high, or a
disabled collector, is left alone; thresholds are put back when the last consumer of the
process that raised them stops, unless someone else changed them meanwhile. The price:
cyclic garbage (an exception kept together with its traceback, say) waits longer for
collection, at most :data:`MOST_OBJECTS` objects more. Turn it off with
``tune_gc=False`` when the process manages the collector itself.
"""

from __future__ import annotations

import contextlib
import gc
import threading
from collections.abc import Iterator

OBJECTS_PER_MESSAGE = 8
"""Container objects a buffered message keeps alive, with room to spare: the message, its
lane and completion entries, and with results its records and their group."""
MOST_OBJECTS = 100_000
"""The highest threshold :func:`sized_for` sets, whatever ``max_buffered`` is."""

_lock = threading.Lock()
_entered = 0
_restore: tuple[int, int, int] | None = None
"""The thresholds from before the first raise, while consumers that raised them run."""
_raised: tuple[int, int, int] | None = None
"""The thresholds this module set, to tell whether someone changed them since."""


def threshold_for(max_buffered: int) -> int:
    """The youngest generation's threshold for a buffer of ``max_buffered`` messages."""
    return min(OBJECTS_PER_MESSAGE * max_buffered, MOST_OBJECTS)


@contextlib.contextmanager
def sized_for(max_buffered: int) -> Iterator[None]:
    """Raise the youngest generation's threshold for a consumer's run (see the module)."""
    _enter(threshold_for(max_buffered))
    try:
        yield
    finally:
        _leave()


def _enter(wanted: int) -> None:
    global _entered, _restore, _raised
    with _lock:
        _entered += 1
        current = gc.get_threshold()
        if not gc.isenabled() or current[0] == 0 or current[0] >= wanted:
            return
        if _restore is None:
            _restore = current
        gc.set_threshold(wanted, current[1], current[2])
        _raised = gc.get_threshold()


def _leave() -> None:
    global _entered, _restore, _raised
    with _lock:
        _entered -= 1
        if _entered or _restore is None:
            return
        if gc.get_threshold() == _raised:
            gc.set_threshold(*_restore)
        _restore = _raised = None
