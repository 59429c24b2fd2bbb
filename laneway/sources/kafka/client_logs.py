"""librdkafka's own log lines and errors, routed into Python logging without the flood.

Without this, librdkafka writes straight to stderr, about 19 lines a second while a
broker is unreachable. laneway's Kafka clients hand librdkafka the ``laneway.librdkafka``
logger (confluent-kafka's ``logger`` setting; lines arrive while the client is polled)
and an :class:`ErrorReporter` as ``error_cb``. A :class:`RepeatFilter` on that logger lets
each distinct line through once per ``REPEAT_WINDOW`` seconds and says how often it was
held back. A user's own ``logger`` or ``error_cb`` setting is left as it is.
"""

from __future__ import annotations

import logging
import threading
import time

from confluent_kafka import KafkaError, KafkaException

LIBRDKAFKA_LOGGER = logging.getLogger("laneway.librdkafka")
"""The logger librdkafka's lines go to (its level tunes them: DEBUG shows everything)."""
ERRORS_LOGGER = logging.getLogger("laneway.kafka")
"""Client errors reported through ``error_cb``."""

REPEAT_WINDOW = 30.0
"""Seconds during which the same line is logged once."""


class RepeatFilter(logging.Filter):
    """Passes each distinct message once per ``window`` seconds; the next time it passes
    it says how many times it was held back meanwhile. Thread-safe (librdkafka lines may
    come from any thread that polls a client)."""

    def __init__(self, window: float = REPEAT_WINDOW) -> None:
        super().__init__()
        self._window = window
        self._lock = threading.Lock()
        self._seen: dict[str, tuple[float, int]] = {}

    def filter(self, record: logging.LogRecord) -> bool:
        text = record.getMessage()
        now = time.monotonic()
        with self._lock:
            last, held = self._seen.get(text, (-self._window, 0))
            if now - last < self._window:
                self._seen[text] = (last, held + 1)
                return False
            self._seen[text] = (now, 0)
            if len(self._seen) > 1_000:
                self._seen = {k: v for k, v in self._seen.items() if now - v[0] < self._window}
        if held:
            record.msg = f"{text} (and {held} more like it in the last {self._window:g} s)"
            record.args = ()
        return True


class ErrorReporter:
    """An ``error_cb`` that logs client errors as clear warnings (fatal ones as errors),
    each distinct one once per ``REPEAT_WINDOW``, and remembers the last for diagnostics
    (e.g. why a broker could not be reached)."""

    def __init__(self, name: str) -> None:
        self._name = name
        self.last: str | None = None

    def __call__(self, error: KafkaError) -> None:
        text = describe_error(error)
        self.last = text
        level = logging.ERROR if error.fatal() else logging.WARNING
        ERRORS_LOGGER.log(level, "%s: %s", self._name, text)


def client_logging(name: str, config: dict[str, object]) -> ErrorReporter:
    """Add the ``logger`` and ``error_cb`` settings to ``config`` unless the user gave
    their own; return the reporter (it also records errors when the user's logger is kept)."""
    reporter = ErrorReporter(name)
    config.setdefault("logger", LIBRDKAFKA_LOGGER)
    config.setdefault("error_cb", reporter)
    return reporter


def describe_error(error: KafkaError) -> str:
    """A librdkafka error as ``NAME (text)``."""
    return f"{error.name()} ({error.str()})"


def describe(exc: Exception) -> str:
    """An exception of a Kafka client call as text (a KafkaError's name and text)."""
    if isinstance(exc, KafkaException) and exc.args and isinstance(exc.args[0], KafkaError):
        return describe_error(exc.args[0])
    return str(exc)


for _logger in (LIBRDKAFKA_LOGGER, ERRORS_LOGGER):
    _logger.addFilter(RepeatFilter())
