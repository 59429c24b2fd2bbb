"""DeadLetterRouter: what happens to a message after its last failed attempt."""

from __future__ import annotations

import time

from laneway.config import ConsumerConfig
from laneway.control.dead_letters.failure_log import FailureLog
from laneway.engines.circuit import KeyCircuitBreaker, open_failure
from laneway.logs import get_logger, key_clause
from laneway.metrics import Metric
from laneway.producing.acknowledged import AcknowledgedWrites
from laneway.producing.producer import TraceContext
from laneway.results import Produce
from laneway.retry import RetryQueue
from laneway.serde.decoding import as_read
from laneway.sources.base import Source
from laneway.stats import FailureNote
from laneway.types import Failure, Header, Message, PartitionId

log = get_logger("laneway.dead_letters")

CLOSE_POLL_S = 0.005
"""Seconds between two looks at the dead-letter writes while :meth:`DeadLetterRouter.close`
waits for them."""

HEADER_PREFIX = "laneway."
"""Dead-letter headers (after the original ones): ``laneway.error.type``,
``laneway.error.message``, ``laneway.attempts``, ``laneway.original.topic``,
``laneway.original.partition``, ``laneway.original.offset``, ``laneway.original.timestamp``
and, when there is one, ``laneway.error.traceback`` (its last 4,000 characters). Values
are UTF-8 text."""


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
    if failure.traceback:
        fields["error.traceback"] = failure.traceback
    added = [(HEADER_PREFIX + name, value.encode()) for name, value in fields.items()]
    return [*m.headers, *added]


class DeadLetterRouter:
    """Hands failed messages to ``on_failure`` or the dead-letter topic, then settles them.

    A failed message's offset counts as finished only once it is *settled*: the
    ``on_failure`` callback returned, or the dead-letter record was acknowledged by the
    log (through :class:`~laneway.producing.acknowledged.AcknowledgedWrites`), or dead
    letters are off (``dead_letter_topic=None`` logs and settles). A callback that raises
    or a write that fails is retried with the consumer's retry backoff, forever and
    without blocking anything but that message's partition's commit point (other
    partitions, and other messages of the same partition, go on). A missing dead-letter
    topic is created with the source topic's partition count.

    Used from the control thread only.
    """

    def __init__(
        self, source: Source, config: ConsumerConfig, tracing: TraceContext | None = None
    ) -> None:
        self._config = config
        self._tracing = tracing
        self._metrics = config.metrics
        self._on_failure = config.on_failure
        self._writes: AcknowledgedWrites[Failure] = AcknowledgedWrites(
            source.producer, config.retry
        )
        self._callbacks: RetryQueue[Failure] = RetryQueue()
        self._settled: list[Message] = []
        self._unsettled_callbacks = 0
        self._breaker = (
            None
            if config.poison_threshold is None
            else KeyCircuitBreaker(config.poison_threshold, config.poison_cooldown)
        )
        self._log = FailureLog()
        self._closed = False
        self.dead_lettered = 0

    @property
    def pending(self) -> int:
        """Failed messages not settled yet."""
        return self._unsettled_callbacks + self._writes.pending

    @property
    def recent(self) -> tuple[FailureNote, ...]:
        """The latest messages settled as failed, oldest first (see :class:`FailureLog`)."""
        return tuple(self._log.recent)

    @property
    def write_errors(self) -> int:
        """Failed dead-letter writes so far (each was or will be written again)."""
        return self._writes.write_errors

    def route(self, failures: list[Failure]) -> set[PartitionId]:
        """Take final failures reported by the engine; return the partitions of keys whose
        circuit these failures opened (their queued messages are to be diverted too)."""
        opened: set[PartitionId] = set()
        for failure in failures:
            m = failure.message
            breaker = self._breaker
            if breaker is not None and failure.attempts > 0 and breaker.record_failure(m):
                opened.add((m.topic, m.partition))
                log.warning(
                    "the key of %s[%d]@%d%s failed %d times: its circuit is open for %g s, its "
                    "messages go to dead letters without running",
                    m.topic,
                    m.partition,
                    m.offset,
                    key_clause(m.key),
                    self._config.poison_threshold,
                    self._config.poison_cooldown,
                )
            self._deliver(failure)
        return opened

    def divert_poisoned(self, messages: list[Message]) -> list[Message]:
        """Route messages of keys whose circuit is open; return the ones to run."""
        breaker = self._breaker
        if breaker is None or not breaker.has_open():
            return messages
        runnable: list[Message] = []
        for message in messages:
            if breaker.is_open(message):
                self._deliver(open_failure(message))
            else:
                runnable.append(message)
        return runnable

    def poll(self) -> list[Message]:
        """Serve acknowledgements and due retries (until closed); return the messages
        settled since."""
        if not self._closed:
            for failure, tries in self._callbacks.due():
                self._call_back(failure, tries)
            for failure in self._writes.poll():
                self._dead_lettered(failure)
            self._log.tick()
        settled, self._settled = self._settled, []
        return settled

    def close(self, timeout: float) -> None:
        """Serve dead-letter writes for up to ``timeout`` s more, then release the producer.

        A dead letter counts (logged "dead-lettered to X", settled, its offset committable)
        only when :meth:`poll` saw its write acknowledged. Closing the producer serves its
        last delivery reports without handing failures back, so nothing is settled after
        it: a write still unacknowledged (or failed) then leaves its message unsettled and
        its offset uncommitted, to run again after a restart.
        """
        deadline = time.monotonic() + timeout
        while self._writes.pending and time.monotonic() < deadline:
            for failure in self._writes.poll():
                self._dead_lettered(failure)
            time.sleep(CLOSE_POLL_S)
        self._closed = True
        self._writes.close(0.0)
        self._log.flush()

    def _dead_lettered(self, failure: Failure) -> None:
        self.dead_lettered += 1
        self._metrics.increment(Metric.DEAD_LETTERS, 1, (failure.message.topic,))
        self._log.failed(failure, f"dead-lettered to {self._topic_for(failure)}")
        self._settled.append(failure.message)

    def _deliver(self, failure: Failure) -> None:
        if self._on_failure is not None:
            self._unsettled_callbacks += 1
            self._call_back(failure, 0)
        elif self._config.dead_letter_topic is None:
            self._log.failed(failure, "dropped (dead_letter_topic=None)")
            self._settled.append(failure.message)
        else:
            m = failure.message
            topic = self._topic_for(failure)
            headers = dead_letter_headers(failure)
            if self._tracing is not None:
                headers = self._tracing.dead_letter_headers(m, topic, headers)
            record = Produce(topic, m.value, m.key, headers)
            self._writes.write(failure, [record], like=m.topic)

    def _call_back(self, failure: Failure, tries: int) -> None:
        assert self._on_failure is not None
        try:
            self._on_failure(as_read(failure.message), failure)  # typed: bytes as read
        except Exception as error:
            delay = self._callbacks.later(failure, tries + 1, self._config.retry)
            log.warning("on_failure raised %r; retrying in %.2fs", error, delay)
            return
        self._unsettled_callbacks -= 1
        self._log.failed(failure, "handed to on_failure")
        self._settled.append(failure.message)

    def _topic_for(self, failure: Failure) -> str:
        template = self._config.dead_letter_topic
        assert template is not None
        return template.format(topic=failure.message.topic)
