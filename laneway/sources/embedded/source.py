"""EmbeddedSource: one consumer-group member reading from an EmbeddedLog."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping

from laneway.config import ConsumerConfig
from laneway.errors import SourceError
from laneway.offsets.offset_progress import OffsetProgress
from laneway.options import seconds, whole_number
from laneway.producing.producer import Producer
from laneway.producing.transactions import Transaction
from laneway.sources.base import RebalanceListener, SourceCapabilities
from laneway.sources.embedded.coordinator import GroupCoordinator
from laneway.sources.embedded.group import GenerationEpochs, Member
from laneway.types import CommitPosition, Message, PartitionId

EMBEDDED_LOG = SourceCapabilities(transactions=True, rewinds=True)
"""What an embedded-log source can do: a partitioned log with atomic write-and-commit."""


class EmbeddedSource:
    """A :class:`laneway.sources.base.Source` over an :class:`laneway.EmbeddedLog` group.

    Create it with ``log.subscribe(topics, group, session_timeout=30.0)``; ``open(listener)``
    joins the group and the first assignment arrives in the first ``poll``. Rebalance
    callbacks run inside ``poll``, in the polling thread: ``on_lost``, then ``on_revoked``
    (commits made during it still count; the partitions move only after it returns), then
    ``on_assigned`` with each partition's committed position (``None``: nothing committed,
    reading starts at the earliest retained offset), checked against the partition's end
    first: finished offsets at or past it are dropped from the metadata, and a committed
    offset beyond it counts as nothing committed (see :mod:`laneway.offsets.log_end`).

    ``poll`` shares ``max_messages`` fairly over the owned, non-paused partitions and returns
    the log's own :class:`laneway.Message` objects (no copies). Poll more often than
    ``session_timeout`` (pause partitions rather than stop polling), or the group takes the
    partitions away and rejects later commits for them. ``close()`` leaves the group without
    ``on_revoked``: commit before closing.

    A source is used from one thread. The one exception is :meth:`wakeup`, which any thread
    may call to end a waiting ``poll`` early.
    """

    def __init__(
        self,
        coordinator: GroupCoordinator,
        member: Member,
        producer: Callable[[], Producer],
        transaction: Callable[[], Transaction],
        log: object = None,
    ) -> None:
        self._coordinator = coordinator
        self.log = log
        """The :class:`~laneway.sources.embedded.log.EmbeddedLog` read (for a state store's
        changelog)."""
        self._producer = producer
        self._transaction = transaction
        self._member = member
        self._listener: RebalanceListener | None = None
        self._closed = False

    @property
    def group(self) -> str:
        return self._member.group

    @property
    def topics(self) -> tuple[str, ...]:
        """The topics subscribed to."""
        return self._member.topics

    @property
    def name(self) -> str:
        return f"embedded:{self._member.group}/{','.join(self._member.topics)}"

    def producer(self) -> Producer:
        """A new producer appending to the same log."""
        return self._producer()

    def transaction(self) -> Transaction:
        """A transaction for ``exactly_once=True``: records appended together with the
        commit (see :class:`~laneway.sources.embedded.transactions.EmbeddedTransaction`)."""
        return self._transaction()

    @property
    def capabilities(self) -> SourceCapabilities:
        """Every ordering, pausable partitions, retries in place, transactions, rewinds."""
        return EMBEDDED_LOG

    def progress(self, config: ConsumerConfig) -> OffsetProgress:
        """Progress by committed offsets, through :meth:`commit`, checked against the
        generations of the records polled."""
        return OffsetProgress(self, config.metadata_max_bytes, GenerationEpochs(self._member))

    def open(self, listener: RebalanceListener) -> None:
        if self._closed:
            raise SourceError(f"{self.name} is closed")
        if self._listener is not None:
            raise SourceError(f"{self.name} is already open")
        self._coordinator.join(self._member)
        self._listener = listener

    def poll(self, max_messages: int, timeout: float) -> list[Message]:
        """Up to ``max_messages`` records, in offset order per partition; waits <= ``timeout`` s."""
        listener = self._require_open()
        whole_number(max_messages, "max_messages")
        deadline = time.monotonic() + seconds(timeout, "timeout", allow_zero=True)
        coordinator, member = self._coordinator, self._member
        while True:
            lost, revoke, assigned = coordinator.events(member)
            if lost:
                listener.on_lost(lost)
            if revoke:
                try:
                    listener.on_revoked(revoke)
                finally:
                    coordinator.release(member, revoke)
            if assigned:
                listener.on_assigned(assigned)
            batch, again = coordinator.fetch(member, max_messages, deadline)
            if batch or not again:
                return batch

    def commit(self, positions: Mapping[PartitionId, CommitPosition]) -> None:
        """Commit for owned partitions; :class:`SourceError` if any is not owned (fenced)."""
        self._require_open()
        if positions:
            self._coordinator.commit(self._member, positions)

    def pause(self, partitions: Iterable[PartitionId]) -> None:
        """Stop returning records of owned ``partitions`` (others are ignored)."""
        self._require_open()
        self._coordinator.set_paused(self._member, list(partitions), True)

    def resume(self, partitions: Iterable[PartitionId]) -> None:
        self._require_open()
        self._coordinator.set_paused(self._member, list(partitions), False)

    def rewind(self, positions: Mapping[PartitionId, int]) -> None:
        """Move this member's fetch position of owned partitions back to ``positions``."""
        self._require_open()
        self._coordinator.rewind(self._member, positions)

    def unread(self, partitions: Iterable[PartitionId]) -> dict[PartitionId, int]:
        """Records of each owned partition beyond this member's fetch position."""
        self._require_open()
        return self._coordinator.unread(self._member, list(partitions))

    def log_ends(self, partitions: Iterable[PartitionId]) -> dict[PartitionId, int]:
        """The end offset (next offset to be written) of each owned partition."""
        self._require_open()
        return self._coordinator.ends(self._member, list(partitions))

    def assignment(self) -> list[PartitionId]:
        """The partitions this member owns now (assigned and not yet revoked or lost)."""
        return self._coordinator.assignment(self._member)

    def wakeup(self) -> None:
        """End a waiting ``poll`` early (it returns what it has, maybe nothing). Thread-safe."""
        self._coordinator.wakeup(self._member)

    def close(self) -> None:
        """Leave the group; its partitions go to the other members. Idempotent."""
        if not self._closed:
            self._closed = True
            self._coordinator.leave(self._member)

    def _require_open(self) -> RebalanceListener:
        if self._closed:
            raise SourceError(f"{self.name} is closed")
        if self._listener is None:
            raise SourceError(f"{self.name}: call open(listener) before using the source")
        return self._listener
