"""The Producer protocol: writing records into the log a source reads from."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import NamedTuple, Protocol

from laneway.results import Produce
from laneway.types import Header, Message


class WriteFailure(NamedTuple):
    """A record the log refused after it was queued: the error text (for logs) and what
    identifies the record, its ``topic``, ``key`` and ``value`` (a log client's failure
    report carries no more; the writer finds its own record by these)."""

    error: str
    topic: str
    key: bytes | None
    value: bytes | None


class Refusal(NamedTuple):
    """A record :meth:`Producer.produce` could not queue: its ``position`` in the records
    given and the error text."""

    position: int
    error: str


class Producer(Protocol):
    """Writes records asynchronously into the log of the source that created it.

    Obtained from ``Source.producer()`` and used from the consumer's control thread only.
    Successes are not reported one by one (a call per record is a good part of what a
    result costs): a record is acknowledged once it is neither :attr:`unacknowledged` nor
    reported by :meth:`poll` as failed. So a writer that waits for ``unacknowledged`` to
    reach 0 knows that everything it queued before is durable, except the failures
    :meth:`poll` handed back. Error texts are for logs; the caller decides whether to
    write again.
    """

    def produce(self, records: Sequence[Produce]) -> list[Refusal]:
        """Queue ``records`` in order without waiting for the log; return those refused at
        once (a full local queue, an unknown topic), which are not queued. One call for a
        whole round of records: Python calls per record are most of what a writer costs."""

    @property
    def unacknowledged(self) -> int:
        """Records queued and neither acknowledged nor handed back as failed yet (after a
        :meth:`poll`). While it is 0 :meth:`poll` has nothing to hand back, and a writer
        need not call it (a Kafka client's poll costs the control thread the GIL)."""

    def poll(self) -> list[WriteFailure]:
        """Serve the log client; the records that failed since the last call."""

    def create_topic_like(self, topic: str, like: str) -> None:
        """Create ``topic`` with the partition count (and record size limit) of ``like``
        unless it exists. Idempotent; raises :class:`laneway.errors.SourceError` when the
        log refuses."""

    def close(self, timeout: float) -> None:
        """Wait up to ``timeout`` s for queued writes; release the producer."""


class TraceContext(Protocol):
    """Continues a message's trace into a record written for it, a dead letter or a result
    (see :mod:`laneway.observability.tracing`)."""

    def dead_letter_headers(
        self, message: Message, topic: str, headers: Iterable[Header]
    ) -> list[Header]: ...
