"""The Producer protocol: writing records into the log a source reads from."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol

from laneway.types import Header, Message

Acknowledge = Callable[[str | None], None]
"""Called once per record: ``None`` when the log acknowledged it (durable), else the error
text of a failed write."""


@dataclass(frozen=True)
class OutgoingRecord:
    """A record to write: ``topic``, ``value``, ``key``, ``headers``, and ``partition``
    (``None``: chosen from the key by the log's partitioner, as for any producer)."""

    topic: str
    value: bytes | None
    key: bytes | None = None
    headers: Sequence[Header] = ()
    partition: int | None = None


class Producer(Protocol):
    """Writes records asynchronously into the log of the source that created it.

    Obtained from ``Source.producer()`` and used from the consumer's control thread only.
    ``produce`` never blocks for long: acknowledgements (or errors) are delivered through
    the ``done`` callback inside a later :meth:`poll` or :meth:`close`. Error texts are
    for logs; the caller decides whether to write again.
    """

    def produce(self, record: OutgoingRecord, done: Acknowledge) -> None:
        """Queue ``record``; ``done`` runs once, in a later :meth:`poll` or :meth:`close`."""

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
