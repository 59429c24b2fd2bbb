"""AcknowledgedWrites: settle an input only after everything written for it is acknowledged."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any, Generic, TypeVar

from laneway.errors import LanewayError
from laneway.producing.producer import Acknowledge, Producer
from laneway.results import Produce
from laneway.retry import RetryPolicy, RetryQueue

log = logging.getLogger(__name__)

T = TypeVar("T")


class _Pending(Generic[T]):
    """One input and how many of its records the log has not acknowledged yet.

    It is the ``done`` callback of the input's first write of every record: one object
    per input, not one per record, because this runs for every result a handler returns
    (and objects that live until the log acknowledges them are what the garbage
    collector walks over and over). A record written again after a failure is
    acknowledged through :meth:`AcknowledgedWrites._rewritten` instead, which carries the
    try count.
    """

    __slots__ = ("abandoned", "input", "like", "unacknowledged", "writes")

    def __init__(
        self, writes: AcknowledgedWrites[T], input: T, unacknowledged: int, like: str | None
    ) -> None:
        self.writes = writes
        self.input = input
        self.like = like
        self.unacknowledged = unacknowledged
        self.abandoned = False

    def __call__(self, error: Any, written: Any) -> None:
        if error is None:
            if not self.abandoned:
                self.unacknowledged -= 1
                if not self.unacknowledged:
                    self.writes._settle(self)
        else:
            self.writes._failed(self, 0, error, written)


class AcknowledgedWrites(Generic[T]):
    """Writes records on behalf of inputs and hands back each input once all its records
    are acknowledged by the log.

    This is what keeps at-least-once true when a consumer writes on: an input (the failed
    message behind a dead letter, or the message a handler produced results for) must
    not count as finished, and so must not be committed, before what was written for it
    is durable. A record whose write fails is written again after the ``policy``'s
    backoff without holding up any other input (only the input's own partition's commit
    point waits); each failure is logged as a WARNING. By default that goes on for as long
    as it takes (dead letters must not be lost); with ``give_up_after`` a record that
    failed that many times more gives its input up: :meth:`abandoned` hands it back with
    the last error, for the dead-letter path (handler results).

    ``producer`` is created on first use (a consumer without failures never opens a
    Kafka producer). With ``like`` given to :meth:`write`, missing topics are created
    with the partition count of that topic first (dead-letter topics); otherwise a
    missing topic is a failed write.

    Used from the control thread only; call :meth:`poll` every loop turn.
    """

    def __init__(
        self,
        producer: Callable[[], Producer],
        policy: RetryPolicy,
        give_up_after: int | None = None,
    ) -> None:
        self._open_producer = producer
        self._producer: Producer | None = None
        self._policy = policy
        self._give_up_after = give_up_after
        self._retries: RetryQueue[tuple[_Pending[T], Produce]] = RetryQueue()
        self._settled: list[T] = []
        self._abandoned: list[tuple[T, str, int]] = []
        self._ensured: set[str] = set()
        self.pending = 0
        """Inputs written for and not yet settled."""
        self.write_errors = 0
        """Failed writes so far (each one was or will be written again)."""

    def write(self, input: T, records: Sequence[Produce], like: str | None = None) -> None:
        """Write ``records`` for ``input``; it is handed back by :meth:`poll` once all of
        them are acknowledged (at once when there are none)."""
        self.pending += 1
        pending = _Pending(self, input, len(records), like)
        if not records:
            self._settle(pending)
            return
        for record in records:
            self._send(pending, record, 0)

    def poll(self) -> list[T]:
        """Serve acknowledgements and due rewrites; return the inputs settled since."""
        if self._producer is not None:
            self._producer.poll()
        for (pending, record), tries in self._retries.due():
            if not pending.abandoned:
                self._send(pending, record, tries)
        settled, self._settled = self._settled, []
        return settled

    def abandoned(self) -> list[tuple[T, str, int]]:
        """Inputs given up since the last call (``give_up_after``), each with the error
        text of its last failed write and how many writes were tried."""
        abandoned, self._abandoned = self._abandoned, []
        return abandoned

    def close(self, timeout: float) -> None:
        """Wait up to ``timeout`` s for queued writes; release the producer."""
        if self._producer is not None:
            self._producer.close(timeout)

    def _send(self, pending: _Pending[T], record: Produce, tries: int) -> None:
        done: Acknowledge = pending if not tries else partial(self._rewritten, pending, tries)
        producer = self._producer
        try:
            if producer is None:
                producer = self._producer = self._open_producer()
            if pending.like is not None and record.topic not in self._ensured:
                producer.create_topic_like(record.topic, pending.like)
                self._ensured.add(record.topic)
            producer.produce(record, done)
        except LanewayError as error:
            self._retry_or_give_up(pending, record, tries, f"{type(error).__name__}: {error}")

    def _rewritten(self, pending: _Pending[T], tries: int, error: Any, written: Any) -> None:
        """``done`` of a record written again after ``tries`` failed writes."""
        if error is None:
            pending(None, written)
        else:
            self._failed(pending, tries, error, written)

    def _failed(self, pending: _Pending[T], tries: int, error: Any, written: Any) -> None:
        if pending.abandoned:
            return
        assert self._producer is not None  # it reported the failure
        text, record = self._producer.failure(error, written)
        self._retry_or_give_up(pending, record, tries, text)

    def _retry_or_give_up(
        self, pending: _Pending[T], record: Produce, tries: int, text: str
    ) -> None:
        """A write of ``record`` failed after ``tries`` earlier failures: write it again
        after the backoff, or (past ``give_up_after``) give its input up."""
        self.write_errors += 1
        limit = self._give_up_after
        if limit is not None and tries >= limit:
            log.warning("write to %s failed: %s; giving up", record.topic, text)
            pending.abandoned = True
            self.pending -= 1
            self._abandoned.append((pending.input, text, tries + 1))
            return
        delay = self._retries.later((pending, record), tries + 1, self._policy)
        log.warning("write to %s failed: %s; retrying in %.2fs", record.topic, text, delay)

    def _settle(self, pending: _Pending[T]) -> None:
        self.pending -= 1
        self._settled.append(pending.input)
