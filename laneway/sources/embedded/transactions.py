"""EmbeddedTransaction: exactly-once results and offsets on an EmbeddedLog."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from laneway.errors import LanewayError, TransactionError
from laneway.results import Produce
from laneway.types import CommitPosition, PartitionId, RecordEpochs

Transact = Callable[[Mapping[PartitionId, CommitPosition], Sequence[Produce]], None]
"""Appends records and commits positions for one group member, atomically."""


class EmbeddedTransaction:
    """The :class:`~laneway.producing.transactions.Transaction` of an embedded-log member.

    Records are held back (no reader can see them) until :meth:`commit`, which appends them
    and commits the positions under the log's lock in one step: readers see the results of
    an input exactly when its offset is committed. A member that no longer owns a
    partition it commits (it was revoked or evicted: a zombie) has the whole transaction
    refused, records included, as is a record for a topic the log does not have.

    Durable logs (``path``): records are flushed before the commit file is replaced, so a
    process killed between the two writes repeats that transaction's inputs after a
    restart (their results are then in the log twice); in memory the step is atomic.
    Bounded logs (``capacity``) are refused: a transaction cannot wait for room while
    holding the lock.
    """

    def __init__(self, transact: Transact, record_epochs: RecordEpochs | None = None) -> None:
        self._transact = transact
        self._record_epochs = record_epochs
        self._records: list[Produce] = []

    @property
    def record_epochs(self) -> RecordEpochs | None:
        """The generations of the records the member polls."""
        return self._record_epochs

    def produce(self, record: Produce) -> None:
        self._records.append(record)

    def commit(self, positions: Mapping[PartitionId, CommitPosition]) -> None:
        if not positions and not self._records:
            return
        records, self._records = self._records, []
        try:
            self._transact(positions, records)
        except LanewayError as error:
            raise TransactionError(f"the transaction was refused: {error}") from error

    def poll(self) -> None:
        """Nothing to serve: records wait for the commit."""

    def close(self) -> None:
        self._records = []
