"""DeadLetterRouter: what happens to a message after its last failed attempt."""

from __future__ import annotations

import heapq
import itertools
import logging
import time
from collections.abc import Callable
from functools import partial

from laneway.config import ConsumerConfig
from laneway.scheduling.circuit import KeyCircuitBreaker
from laneway.sources.base import DeadLetterWriter, Source
from laneway.types import Failure, Header, Message

log = logging.getLogger(__name__)

FailureCallback = Callable[[Message, Failure], object]

HEADER_PREFIX = "laneway."
"""Dead-letter headers (after the original ones): ``laneway.error.type``,
``laneway.error.message``, ``laneway.attempts``, ``laneway.original.topic``,
``laneway.original.partition``, ``laneway.original.offset``, ``laneway.original.timestamp``
(values are UTF-8 text)."""


def dead_letter_headers(failure: Failure) -> list[Header]:
    m = failure.message
    fields = {
        "error.type": failure.error_type,
        "error.message": failure.error_message,
        "attempts": str(failure.attempts),
        "original.topic": m.topic,
        "original.partition": str(m.partition),
        "original.offset": str(m.offset),
        "original.timestamp": str(m.timestamp),
    }
    added = [(HEADER_PREFIX + name, value.encode()) for name, value in fields.items()]
    return [*m.headers, *added]


class DeadLetterRouter:
    """Hands failed messages to ``on_failure`` or the dead-letter topic, then settles them.

    A failed message's offset counts as finished only once it is *settled*: the
    ``on_failure`` callback returned, or the dead-letter write was acknowledged (or
    dead letters are off: ``dead_letter_topic=None`` logs and settles). A callback that
    raises or a write that fails is retried with the consumer's retry backoff, forever
    and without blocking anything but that message's partition's commit point (other
    partitions, and other messages of the same partition, go on).

    Used from the control thread only.
    """

    def __init__(
        self, source: Source, config: ConsumerConfig, on_failure: FailureCallback | None
    ) -> None:
        self._source = source
        self._config = config
        self._on_failure = on_failure
        self._writer: DeadLetterWriter | None = None
        self._settled: list[Message] = []
        self._retries: list[tuple[float, int, Failure, int]] = []
        self._sequence = itertools.count()
        self._breaker = (
            None
            if config.poison_threshold is None
            else KeyCircuitBreaker(config.poison_threshold, config.poison_cooldown)
        )
        self.pending = 0
        self.dead_lettered = 0
        self.write_errors = 0

    def route(self, failures: list[Failure]) -> None:
        """Take final failures reported by the engine."""
        for failure in failures:
            if self._breaker is not None and failure.attempts > 0:
                self._breaker.record_failure(failure.message)
            self.pending += 1
            self._deliver(failure, 0)

    def divert_poisoned(self, messages: list[Message]) -> list[Message]:
        """Route messages of keys whose circuit is open; return the ones to run."""
        breaker = self._breaker
        if breaker is None or not breaker.has_open():
            return messages
        runnable: list[Message] = []
        for message in messages:
            if breaker.is_open(message):
                self.pending += 1
                reason = "the key's circuit is open after repeated failures"
                self._deliver(Failure(message, "CircuitOpen", reason, 0), 0)
            else:
                runnable.append(message)
        return runnable

    def poll(self) -> list[Message]:
        """Serve acknowledgements and due retries; return the messages settled since."""
        if self._writer is not None:
            self._writer.poll()
        now = time.monotonic()
        while self._retries and self._retries[0][0] <= now:
            _, _, failure, tries = heapq.heappop(self._retries)
            self._deliver(failure, tries)
        settled, self._settled = self._settled, []
        return settled

    def close(self, timeout: float) -> None:
        if self._writer is not None:
            self._writer.close(timeout)

    def _deliver(self, failure: Failure, tries: int) -> None:
        if self._on_failure is not None:
            try:
                self._on_failure(failure.message, failure)
            except Exception as error:
                self._retry_later(failure, tries, f"on_failure raised {error!r}")
                return
            self._settle(failure)
            return
        template = self._config.dead_letter_topic
        if template is None:
            _log_failure(failure, "dropped (dead_letter_topic=None)")
            self._settle(failure)
            return
        if self._writer is None:
            self._writer = self._source.dead_letters()
        topic = template.format(topic=failure.message.topic)
        done = partial(self._written, failure, tries, topic)
        self._writer.write(topic, failure.message, dead_letter_headers(failure), done)

    def _written(self, failure: Failure, tries: int, topic: str, error: str | None) -> None:
        if error is not None:
            self.write_errors += 1
            self._retry_later(failure, tries, f"dead-letter write to {topic} failed: {error}")
            return
        self.dead_lettered += 1
        _log_failure(failure, f"dead-lettered to {topic}")
        self._settle(failure)

    def _settle(self, failure: Failure) -> None:
        self.pending -= 1
        self._settled.append(failure.message)

    def _retry_later(self, failure: Failure, tries: int, why: str) -> None:
        delay = self._config.retry.delay(tries + 1)
        log.warning("%s; retrying in %.2fs", why, delay)
        due = time.monotonic() + delay
        heapq.heappush(self._retries, (due, next(self._sequence), failure, tries + 1))


def _log_failure(failure: Failure, outcome: str) -> None:
    m = failure.message
    log.error(
        "handler failed on %s[%d]@%d after %d attempt(s): %s: %s; %s",
        m.topic,
        m.partition,
        m.offset,
        failure.attempts,
        failure.error_type,
        failure.error_message,
        outcome,
    )
