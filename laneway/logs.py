"""laneway's loggers, with repeated lines held back and counted.

Every laneway module gets its logger from :func:`get_logger` (a plain
:func:`logging.getLogger` logger with :data:`REPEATS` attached). A line at ``WARNING`` or
above that is identical (same logger, level and text) to one logged less than
``REPEAT_WINDOW`` seconds ago is held back; the next time it passes it says how often it
was held back meanwhile, e.g. ``write to results failed: ... (repeated 4,211 times in the
last 30 s)``. So a failure that repeats thousands of times a second costs a line every
30 seconds, and nothing is lost but the duplicates. ``DEBUG`` and ``INFO`` lines always
pass (turn the logger to ``DEBUG`` to see everything); librdkafka's own lines, which
arrive at every level, are held back at every level (see
:mod:`laneway.sources.kafka.client_logs`).
"""

from __future__ import annotations

import logging
import threading
import time

REPEAT_WINDOW = 30.0
"""Seconds during which an identical line is logged once."""
MAX_REMEMBERED = 1_000
"""Distinct lines remembered at most; older ones are forgotten first when there are more."""


class RepeatFilter(logging.Filter):
    """Passes each distinct line (logger, level and text) once per ``window`` seconds;
    the next time it passes it says how often it was held back meanwhile. Lines below
    ``level`` always pass. Thread-safe: lines come from the control thread, engine
    threads and librdkafka's callbacks.

    Tuning: ``window`` trades how often a persistent failure is told against how soon a
    changed count shows; :func:`forget_repeats` starts afresh (tests call it between
    cases).
    """

    def __init__(self, window: float = REPEAT_WINDOW, level: int = logging.WARNING) -> None:
        super().__init__()
        self._window = window
        self._level = level
        self._lock = threading.Lock()
        self._seen: dict[tuple[str, int, str], tuple[float, int]] = {}

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno < self._level:
            return True
        text = record.getMessage()
        key = (record.name, record.levelno, text)
        now = time.monotonic()
        with self._lock:
            last, held = self._seen.get(key, (now - self._window, 0))
            if now - last < self._window:
                self._seen[key] = (last, held + 1)
                return False
            self._seen[key] = (now, 0)
            if len(self._seen) > MAX_REMEMBERED:
                self._forget_old(now)
        if held:
            record.msg = f"{text} (repeated {held:,} times in the last {now - last:.0f} s)"
            record.args = ()
        return True

    def forget(self) -> None:
        """Forget every line seen (held-back counts are dropped)."""
        with self._lock:
            self._seen.clear()

    def _forget_old(self, now: float) -> None:
        recent = {key: seen for key, seen in self._seen.items() if now - seen[0] < self._window}
        if len(recent) > MAX_REMEMBERED:  # a burst of distinct lines: keep the newest
            newest = sorted(recent.items(), key=lambda item: item[1][0])[-MAX_REMEMBERED // 2 :]
            recent = dict(newest)
        self._seen = recent


REPEATS = RepeatFilter()
"""The filter of every logger from :func:`get_logger` (one memory for all of them)."""
REPEATS_AT_EVERY_LEVEL = RepeatFilter(level=logging.NOTSET)
"""The filter of loggers whose lines repeat at every level (librdkafka's)."""


def get_logger(name: str, every_level: bool = False) -> logging.Logger:
    """The logger called ``name`` with :data:`REPEATS` attached (once), or with
    :data:`REPEATS_AT_EVERY_LEVEL` when ``every_level``."""
    logger = logging.getLogger(name)
    repeats = REPEATS_AT_EVERY_LEVEL if every_level else REPEATS
    if repeats not in logger.filters:
        logger.addFilter(repeats)
    return logger


def forget_repeats() -> None:
    """Forget every line seen, so the next of each is logged whole."""
    REPEATS.forget()
    REPEATS_AT_EVERY_LEVEL.forget()


_keys_shown = False


def show_keys(shown: bool) -> None:
    """Whether laneway's log lines name message keys (a failed or stalled message's, an
    open circuit's). Keys are message data, so they are left out unless the operator asks:
    ``laneway run --health-show-keys``, the switch that also shows them on ``/readyz`` and
    the status page, turns this on. Process-wide, like the logging configuration."""
    global _keys_shown
    _keys_shown = shown


def key_clause(key: object) -> str:
    """The part of a line that names a message's key: `` (key b'k5')`` when
    :func:`show_keys` allowed it, else nothing."""
    return f" (key {key!r})" if _keys_shown else ""
