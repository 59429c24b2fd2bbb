"""KeyCircuitBreaker: isolates poison keys, where the handler is called and where work is routed."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Hashable, Iterable

from laneway.types import Failure, Message

CIRCUIT_OPEN = "CircuitOpen"
"""The error type of a message not run because its key's circuit was open."""
OPEN_REASON = "the key's circuit is open after repeated failures"
OPEN_ERROR = (CIRCUIT_OPEN, OPEN_REASON, 0, "")
"""That failure as :data:`laneway.retry.ErrorInfo`: error type, text, attempts, traceback."""


def _key_of(message: Message) -> Hashable:
    return (message.topic, message.partition, message.key)


def open_failure(message: Message) -> Failure:
    """The failure of ``message``, not run because its key's circuit is open."""
    return Failure(message, *OPEN_ERROR)


class KeyCircuitBreaker:
    """Opens a key's circuit after ``threshold`` final failures of that key.

    While a key's circuit is open (``cooldown`` seconds), its messages are not run: they go
    straight to the dead-letter path, so a poison key stops eating retries and handler
    time. The failure count restarts when the circuit closes; failures of the key's
    messages that were already running when it opened do not count (nor reopen it).

    Each engine checks its own breaker right before a message runs and records a final
    failure right after it (:class:`~laneway.engines.invoker.Invoker`; a process worker
    keeps its own, and lanes stay in one worker), so with ``ordering="key"`` or
    ``"partition"`` a poison key costs at most ``threshold * (1 + max_retries)`` handler
    calls per cooldown on every engine; with ``"unordered"`` the key's messages that were
    already running when it opened finish their attempts. The control thread keeps another
    to log the opening once and divert the key's queued and newly fetched messages.

    Tuning: a low threshold isolates poison keys fast but also dead-letters healthy
    messages of a key with a passing outage; pair it with a cooldown about as long as
    such outages.

    Thread-safe; :meth:`is_open` takes no lock, and costs one dict lookup while no circuit
    is open.
    """

    def __init__(
        self, threshold: int, cooldown: float, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._threshold = threshold
        self._cooldown = cooldown
        self._clock = clock
        self._lock = threading.Lock()
        self._failures: dict[Hashable, int] = {}
        self._open_until: dict[Hashable, float] = {}

    def record_failure(self, message: Message) -> bool:
        """Count a final failure of ``message``'s key; True when that opened its circuit."""
        key = _key_of(message)
        with self._lock:
            until = self._open_until.get(key)
            if until is not None:
                if until > self._clock():
                    return False
                del self._open_until[key]
            count = self._failures.get(key, 0) + 1
            if count >= self._threshold:
                self._open_until[key] = self._clock() + self._cooldown
                self._failures.pop(key, None)
                return True
            self._failures[key] = count
            return False

    def record(self, failures: Iterable[Failure]) -> None:
        """Count the final failures of messages that ran (``attempts > 0``)."""
        for failure in failures:
            if failure.attempts > 0:
                self.record_failure(failure.message)

    def has_open(self) -> bool:
        """Whether any circuit is open (closes the expired ones first)."""
        if self._open_until:
            with self._lock:
                now = self._clock()
                for key in [k for k, until in self._open_until.items() if until <= now]:
                    del self._open_until[key]
        return bool(self._open_until)

    def is_open(self, message: Message) -> bool:
        """Whether ``message``'s key's circuit is open now."""
        if not self._open_until:
            return False
        key = _key_of(message)
        until = self._open_until.get(key)
        if until is None:
            return False
        if until > self._clock():
            return True
        with self._lock:  # closed: forget it, so that the lookup above stays the only cost
            if self._open_until.get(key) == until:
                del self._open_until[key]
        return False

    def admit(self, messages: list[Message], diverted: list[Failure]) -> list[Message]:
        """The messages whose key's circuit is closed; the others go to ``diverted``."""
        if not self._open_until:
            return messages
        runnable: list[Message] = []
        for message in messages:
            if self.is_open(message):
                diverted.append(open_failure(message))
            else:
                runnable.append(message)
        return runnable
