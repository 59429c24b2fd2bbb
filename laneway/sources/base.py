"""The Source protocol: what the consumer needs from a partitioned log.

A source is used from one thread only, the consumer's control thread. Rebalance
callbacks are invoked *from inside* :meth:`Source.poll` on that same thread (this is how
librdkafka delivers them, and the embedded log does the same), so the control plane never
has its state mutated from another thread.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from laneway.config import ConsumerConfig
from laneway.offsets.progress import Progress
from laneway.options import Ordering
from laneway.producing.producer import Producer
from laneway.producing.transactions import Transaction
from laneway.types import CommitPosition, Message, PartitionId


@dataclass(frozen=True)
class SourceCapabilities:
    """What a source can do.

    ``orderings``: the ordering modes it can keep; another is a ConfigError that gives
    ``why_unordered`` as the reason. ``pauses``: ``pause()`` stops fetching a partition
    while the group session lives on (else backpressure simply stops polling, and the
    source must stay a member without it). ``redelivers``: a failed message is retried by
    the log delivering it again (counted in :attr:`~laneway.types.Message.delivery_count`)
    rather than by the engine in place; its Progress decides each retry.
    ``events_in_poll``: group events (rebalance callbacks) are served inside ``poll()``,
    so the control loop polls for them even when it wants no more messages.
    ``transactions``: ``transaction()`` writes results and commits offsets in one
    transaction (``exactly_once=True``). ``prefetches``: the source fetches ahead on its
    own and takes a bound on that through ``bound_prefetch()`` before it is opened.
    ``waits``: what the source reads may be missing for a while (a topic not created yet,
    or deleted while consuming); ``waiting_for()`` says what, and the consumer is not
    ready meanwhile. ``rewinds``: ``rewind()`` reads partitions again from an earlier
    offset, so messages fetched but not kept (a hot key's excess beyond
    ``max_buffered_per_key``) are read again later instead of being held in memory.
    """

    orderings: frozenset[Ordering] = frozenset(Ordering)
    why_unordered: str = ""
    pauses: bool = True
    redelivers: bool = False
    events_in_poll: bool = True
    transactions: bool = False
    prefetches: bool = False
    waits: bool = False
    rewinds: bool = False


class RebalanceListener(Protocol):
    """Receives partition ownership changes; called from inside ``Source.poll``."""

    def on_assigned(self, positions: Mapping[PartitionId, CommitPosition | None]) -> None:
        """Partitions now owned, with their committed position (``None``: nothing committed)."""

    def on_revoked(self, partitions: Sequence[PartitionId]) -> None:
        """Partitions about to be given up; commits made before returning still count."""

    def on_lost(self, partitions: Sequence[PartitionId]) -> None:
        """Partitions already taken away (commits for them would fail): fence, don't commit."""


class IgnoreRebalances:
    """A :class:`RebalanceListener` that ignores every change: for a reader that commits
    nothing and keeps no state per partition (the bench's raw loop, the testing plugin's
    reader of dead letters)."""

    def on_assigned(self, positions: Mapping[PartitionId, CommitPosition | None]) -> None:
        pass

    def on_revoked(self, partitions: Sequence[PartitionId]) -> None:
        pass

    def on_lost(self, partitions: Sequence[PartitionId]) -> None:
        pass


class Source(Protocol):
    """A partitioned log the consumer reads from and commits to, in batches."""

    def open(self, listener: RebalanceListener) -> None:
        """Subscribe / join the group; assignments arrive through ``listener`` during ``poll``."""

    def poll(self, max_messages: int, timeout: float) -> list[Message]:
        """Return up to ``max_messages`` in offset order per partition; wait up to ``timeout`` s."""

    def progress(self, config: ConsumerConfig) -> Progress:
        """How this source records finished work: a new
        :class:`~laneway.offsets.progress.Progress` for one consumer run with ``config``
        (offset sources return an :class:`~laneway.offsets.offset_progress.OffsetProgress`
        committing through their own ``commit``, its metadata capped at
        ``config.metadata_max_bytes``; a share group acknowledges each record)."""

    @property
    def capabilities(self) -> SourceCapabilities:
        """What the source can do: orderings it keeps, whether it pauses, how it retries,
        whether it offers transactions or bounds a prefetch of its own (see
        :class:`SourceCapabilities`; read once, when a
        ``Consumer`` is made)."""

    def pause(self, partitions: Iterable[PartitionId]) -> None:
        """Stop returning messages of ``partitions`` from ``poll`` (group membership stays;
        a source that cannot pause says so in its capabilities and ignores this)."""

    def resume(self, partitions: Iterable[PartitionId]) -> None:
        """Undo :meth:`pause`."""

    def unread(self, partitions: Iterable[PartitionId]) -> dict[PartitionId, int]:
        """How many messages of each owned partition the source knows of beyond those
        ``poll`` returned (0 when none, or not known yet). A hint, for telling a partition
        with nothing left from one whose messages are still on their way."""

    def log_ends(self, partitions: Iterable[PartitionId]) -> dict[PartitionId, int]:
        """The end offset (high watermark) of each owned partition of ``partitions``, as
        far as the source knows it without a request (for the lag metric; partitions
        whose end is not known yet are left out). Called about once a second."""

    def close(self) -> None:
        """Leave the group and release resources. Idempotent."""

    def producer(self) -> Producer:
        """A new producer into the same log (for dead letters and results; the consumer
        creates it on first use)."""

    @property
    def group(self) -> str:
        """The consumer group the source reads for."""

    @property
    def name(self) -> str:
        """A short description for logs and stats, e.g. ``kafka:127.0.0.1:9092/billing``."""


class TransactionalSource(Source, Protocol):
    """A source whose capabilities declare ``transactions`` (Kafka, the embedded log)."""

    def transaction(self) -> Transaction:
        """A new transactional writer into the source's log, for one consumer run
        (``exactly_once=True``)."""


class WaitingSource(Source, Protocol):
    """A source whose capabilities declare ``waits``: what it reads may be missing for a
    while (a Kafka topic not created yet, or deleted), and it says so."""

    def waiting_for(self) -> str:
        """What the source waits for, as the reason ``Consumer.health()`` gives for not
        being ready ('' when nothing is missing). Safe to call from any thread."""


class RewindingSource(Source, Protocol):
    """A source whose capabilities declare ``rewinds``: it can read a partition again."""

    def rewind(self, positions: Mapping[PartitionId, int]) -> None:
        """Fetch each owned partition of ``positions`` again from that offset (others are
        ignored); what was fetched beyond it comes again too. Raises
        :class:`laneway.errors.SourceError` when the source refuses (the caller tries
        again later)."""


class PrefetchingSource(Source, Protocol):
    """A source whose capabilities declare ``prefetches``: it fetches ahead on its own
    (librdkafka's queue) and can bound that."""

    def bound_prefetch(self, max_bytes: int) -> None:
        """Keep at most about ``max_bytes`` of messages fetched ahead (called before open)."""
