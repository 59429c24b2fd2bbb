"""The Transaction protocol: results and consumed offsets made durable together.

With ``exactly_once=True`` a consumer writes its handlers' results into a transaction of
its source and commits the offsets of the inputs (with the finished-beyond-commit
metadata) *in the same transaction*: readers that read committed data see the results of
an input exactly when its offset is committed, so after a crash or a rebalance an input is
either done with its results visible, or not done and its results discarded. Sources
offer it with ``Source.transaction()``:

* Kafka (:class:`~laneway.sources.kafka.transactions.KafkaTransaction`): a transactional
  producer per member, ``send_offsets_to_transaction`` with the consumer's group metadata,
  one transaction per commit;
* the embedded log (:class:`~laneway.sources.embedded.transactions.EmbeddedTransaction`):
  records held back and appended, with the commit, under the log's lock.

A transaction is begun on demand and ended by :meth:`Transaction.commit`; whatever keeps
it from committing (a failed write, fencing by a newer member) raises
:class:`~laneway.errors.TransactionError`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

from laneway.results import Produce
from laneway.types import CommitPosition, PartitionId, RecordEpochs


class Transaction(Protocol):
    """A source's transactional writer (one per consumer run, used from its control thread).

    It is an :class:`~laneway.offsets.progress.OffsetCommitter`: :meth:`commit` commits
    the consumed positions together with every record produced since the last commit.
    """

    def produce(self, record: Produce) -> None:
        """Add ``record`` to the open transaction (begun on demand). Never blocks for long;
        a write the log refuses makes the next :meth:`commit` fail."""

    def commit(self, positions: Mapping[PartitionId, CommitPosition]) -> None:
        """Commit the open transaction: its records and ``positions`` become visible
        together, or neither does and :class:`~laneway.errors.TransactionError` is raised."""

    def poll(self) -> None:
        """Serve the writer's callbacks (called every loop turn)."""

    def close(self) -> None:
        """Abort the open transaction, if any, and release the writer. Idempotent."""

    @property
    def record_epochs(self) -> RecordEpochs | None:
        """The epochs of the records its source polls (see
        :class:`~laneway.types.RecordEpochs`), for the progress that commits
        through this transaction; ``None`` when the source has none."""
