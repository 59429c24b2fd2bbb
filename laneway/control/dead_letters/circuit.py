"""KeyCircuitBreaker: isolates poison keys."""

from __future__ import annotations

import time
from collections.abc import Callable, Hashable

from laneway.types import Message


def _key_of(message: Message) -> Hashable:
    return (message.topic, message.partition, message.key)


class KeyCircuitBreaker:
    """Opens a key's circuit after ``threshold`` final failures of that key.

    While a key's circuit is open (``cooldown`` seconds), its newly dispatched messages
    are not run: they go straight to the dead-letter path, so a poison key stops eating
    retries and handler time. The failure count restarts when the circuit closes.
    Tuning: a low threshold isolates poison keys fast but also dead-letters healthy
    messages of a key with a passing outage; pair it with a cooldown about as long as
    such outages.
    """

    def __init__(
        self, threshold: int, cooldown: float, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._threshold = threshold
        self._cooldown = cooldown
        self._clock = clock
        self._failures: dict[Hashable, int] = {}
        self._open_until: dict[Hashable, float] = {}

    def record_failure(self, message: Message) -> bool:
        """Count a final failure of ``message``'s key; True when that opened its circuit."""
        key = _key_of(message)
        count = self._failures.get(key, 0) + 1
        if count >= self._threshold:
            self._open_until[key] = self._clock() + self._cooldown
            self._failures.pop(key, None)
            return True
        self._failures[key] = count
        return False

    def has_open(self) -> bool:
        """Whether any circuit is open (closes the expired ones first)."""
        if self._open_until:
            now = self._clock()
            for key in [k for k, until in self._open_until.items() if until <= now]:
                del self._open_until[key]
        return bool(self._open_until)

    def is_open(self, message: Message) -> bool:
        until = self._open_until.get(_key_of(message))
        return until is not None and until > self._clock()
