"""The Producer protocol: writing records into the log a source reads from."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, Protocol

from laneway.results import Produce
from laneway.types import Header, Message

Acknowledge = Callable[[Any, Any], None]
"""``done(error, written)``, called once per record: ``error`` is ``None`` when the log
acknowledged the record (durable); otherwise the write failed, and
:meth:`Producer.failure` turns the two arguments into the error text and the record to
write again. Both arguments are the log client's own (for Kafka, confluent-kafka's
delivery report, passed straight through): a writer hands one ``done`` to many records
and no adapter object is made per record, which matters at a result per message."""


class Producer(Protocol):
    """Writes records asynchronously into the log of the source that created it.

    Obtained from ``Source.producer()`` and used from the consumer's control thread only.
    ``produce`` never blocks for long: acknowledgements (or errors) are delivered through
    the ``done`` callback inside a later :meth:`poll` or :meth:`close`. Error texts are
    for logs; the caller decides whether to write again.
    """

    def produce(self, record: Produce, done: Acknowledge) -> None:
        """Queue ``record``; ``done(error, written)`` runs once, in a later :meth:`poll` or
        :meth:`close` (see :data:`Acknowledge`)."""

    def failure(self, error: Any, written: Any) -> tuple[str, Produce]:
        """The error text of a failed write, and the record to write again, from the
        arguments its ``done`` was called with. The record has the topic, value, key and
        headers written, and the partition the log had put it in (``None`` if none yet)."""

    def create_topic_like(self, topic: str, like: str) -> None:
        """Create ``topic`` with the partition count (and record size limit) of ``like``
        unless it exists. Idempotent; raises :class:`laneway.errors.SourceError` when the
        log refuses."""

    def poll(self) -> None:
        """Run the ``done`` callbacks of writes acknowledged or failed since the last call."""

    def close(self, timeout: float) -> None:
        """Wait up to ``timeout`` s for queued writes (running their callbacks); release."""


class TraceContext(Protocol):
    """Continues a message's trace into a record written for it, a dead letter or a result
    (see :mod:`laneway.observability.tracing`)."""

    def dead_letter_headers(
        self, message: Message, topic: str, headers: Iterable[Header]
    ) -> list[Header]: ...
