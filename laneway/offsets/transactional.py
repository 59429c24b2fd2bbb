"""TransactionalProgress: offset progress whose every commit is a transaction (exactly-once)."""

from __future__ import annotations

from collections.abc import Collection

from laneway.errors import TransactionError
from laneway.logs import get_logger
from laneway.offsets.offset_progress import OffsetProgress
from laneway.producing.transactions import Transaction
from laneway.types import PartitionId

log = get_logger(__name__)


class TransactionalProgress(OffsetProgress):
    """:class:`~laneway.offsets.offset_progress.OffsetProgress` for ``exactly_once=True``.

    Every commit goes through the source's :class:`~laneway.producing.transactions.Transaction`
    and covers *every* owned partition, whichever partitions it was asked for: the open
    transaction holds the results of inputs from all of them, and a result must never
    become visible without its input's offset (a commit on revocation therefore commits
    the partitions kept, too). The offsets carry the finished-beyond-commit metadata, so a
    restart skips inputs whose results are already in.

    Exactly-once leaves no room for *zombies*: work still running for a partition this
    consumer gave up (a revocation whose drain timed out, or a lost partition) would
    write its results into a later transaction. So giving such a partition up breaks
    the run: the next commit aborts and raises :class:`~laneway.errors.TransactionError`
    (the consumer restarts from the last commit). Keep ``drain_timeout`` above the
    slowest handler call to make that rare.
    """

    def __init__(self, transaction: Transaction, metadata_max_bytes: int) -> None:
        super().__init__(transaction, metadata_max_bytes, transaction.record_epochs)
        self._transaction = transaction
        self._broken: str | None = None

    def give_up(self, partitions: Collection[PartitionId]) -> None:
        running = {pid: self.partitions[pid].in_engine for pid in partitions}
        zombies = {pid: count for pid, count in running.items() if count}
        super().give_up(partitions)
        if zombies and self._broken is None:
            self._broken = (
                f"partitions {sorted(zombies)} were given up with {sum(zombies.values())} "
                "messages still running; their results must not reach a later transaction"
            )
            log.error("exactly-once: %s; the next commit aborts", self._broken)

    def commit(self, partitions: Collection[PartitionId]) -> None:
        if self._broken is not None:
            self._transaction.close()
            raise TransactionError(f"the transaction was aborted: {self._broken}")
        positions = self.positions_to_commit(self.partitions)
        try:
            self._transaction.commit(positions)
        except TransactionError as error:
            self._broken = str(error)
            raise
        if positions:
            self.committed_now(positions)
