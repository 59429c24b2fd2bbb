"""The progress seam: how fetched work becomes runnable, finished, and durable.

The control loop does not know *how* a source records progress. It hands every polled
batch to a :class:`Progress` (which says what may run now), reports settled messages to
it (which may free held-back work), and asks it to make finished work durable at commit
time. The source supplies the Progress that fits it (``Source.progress()``):

* sources that commit offsets (Kafka consumer groups, the embedded log) use
  :class:`~laneway.offsets.offset_progress.OffsetProgress`, which commits per partition
  the first unfinished offset and carries finished offsets beyond it in the metadata
  (:mod:`laneway.offsets.codec`) through the source's :class:`OffsetCommitter`
  capability;
* a source that acknowledges records one by one (a Kafka share group) supplies
  :class:`~laneway.sources.share.progress.ShareProgress`, which accepts, releases or
  rejects each record, retries failures by redelivery (:meth:`Progress.failed`) and holds
  fetching back until a poll's records are all acknowledged (:meth:`Progress.awaiting`).

Every method runs on the consumer's control thread.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import Protocol

from laneway.offsets.backlog import PartitionBacklog
from laneway.types import CommitPosition, Failure, Message, PartitionId


@dataclass(slots=True)
class ProgressCounts:
    """The running counts of one :class:`Progress`: written by the progress only, read by
    the control plane (backpressure every loop turn, ``Consumer.stats()`` on demand).

    ``buffered``: fetched messages not yet settled (bounded by the consumer's
    ``max_buffered``); ``buffered_bytes``: their footprint (values, keys, headers; see
    :mod:`laneway.offsets.footprint`), bounded by ``max_buffered_bytes``;
    ``largest_message``: the largest footprint of one message fetched so far (0 before the
    first), what backpressure assumes the next messages may weigh; ``skipped``: fetched
    messages not dispatched because they were done before (a restart); ``fenced``:
    completions discarded because their partition was given up meanwhile (a share group:
    acknowledgements the broker refused); ``commits``: successful commits so far;
    ``deleted``: by topic, records deleted from the log before they were read (retention,
    DeleteRecords), so never processed (see :mod:`laneway.sources.kafka.deleted_records`).
    """

    buffered: int = 0
    buffered_bytes: int = 0
    largest_message: int = 0
    skipped: int = 0
    fenced: int = 0
    commits: int = 0
    deleted: dict[str, int] = field(default_factory=dict)


class PartitionLoad(Protocol):
    """What backpressure needs to know of one owned partition."""

    @property
    def buffered(self) -> int:
        """Fetched, unfinished messages of the partition (running, queued or held back)."""


class OffsetCommitter(Protocol):
    """The capability of a source that records progress as committed offsets."""

    def commit(self, positions: Mapping[PartitionId, CommitPosition]) -> None:
        """Commit synchronously; raises :class:`laneway.errors.SourceError` if it failed."""


class Progress(Protocol):
    """Follows every fetched message of a consumer until its completion is durable.

    Life of a message: :meth:`accept` (fetched: dispatch it now, hold it back, or skip it
    as already done), then either :meth:`settle` (finished, or failed and dead-lettered),
    :meth:`failed` (failed, and maybe retried the progress's own way) or :meth:`unstarted`
    (an engine gave it back without running it); :meth:`commit` makes what is settled
    durable. Partition ownership comes and goes through :meth:`assign` and
    :meth:`give_up`; completions for a partition given up are
    *fenced*: counted, never made durable.
    """

    @property
    def counts(self) -> ProgressCounts:
        """The running counts (buffered messages and bytes, skipped, fenced, commits)."""

    @property
    def partitions(self) -> Mapping[PartitionId, PartitionLoad]:
        """The partitions owned now, with their load."""

    def assign(self, positions: Mapping[PartitionId, CommitPosition | None]) -> None:
        """Partitions now owned, with their committed positions (``None``: none yet)."""

    def give_up(self, partitions: Collection[PartitionId]) -> None:
        """Partitions no longer owned: forget their buffered work, fence what still runs."""

    def accept(self, messages: list[Message]) -> list[Message]:
        """A polled batch: return the messages to dispatch now, in the order given."""

    def unstarted(self, messages: list[Message]) -> None:
        """Dispatched messages an engine gave back without running them."""

    def decline(self, messages: list[Message]) -> None:
        """Messages :meth:`accept` returned to dispatch that the consumer does not keep (a
        hot key's excess): no longer buffered, not finished, delivered again later (a
        partition read again from an earlier offset dispatches them)."""

    def declined(self) -> dict[PartitionId, tuple[int, int]]:
        """Per owned partition holding declined messages: the lowest of their offsets (where
        to read it again from: every offset fetched below it that is not declined is
        skipped when fetched again, so reading from there loses nothing) and the next
        offset it would fetch (up to where reading again is reading again)."""

    def settle(self, finished: list[Message], given_up: list[Message]) -> list[Message]:
        """Messages done with: ``finished`` by their handler, ``given_up`` after their last
        attempt (dead-lettered, handed to ``on_failure``, or dropped). Return held-back
        messages that may be dispatched now. Also called, with whatever is settled, after
        :meth:`failed` took failures, which may have freed held-back work."""

    def failed(self, failures: list[Failure]) -> list[Failure]:
        """Messages whose last attempt in the engine failed (called every loop turn, the
        list often empty): return those to give up on now; they go to dead letters, then
        :meth:`settle`. A progress may keep some to retry its own way (a share group
        releases them for redelivery) and add messages it gave up on without running them
        (a share group's crash-loop records); offset progress returns ``failures``, since
        engines retry in place."""

    def awaiting(self, now: float) -> int:
        """How many fetched messages must be settled before the source may be polled again
        (0: poll away). Called once per loop turn, so it also does the progress's timed
        work (a share group releases records whose retry backoff is over)."""

    def running(self, partitions: Collection[PartitionId]) -> int:
        """How many dispatched messages of ``partitions`` are not settled yet."""

    def commit(self, partitions: Collection[PartitionId]) -> None:
        """Make the settled work of ``partitions`` durable; raises
        :class:`laneway.errors.SourceError` when the source refuses (nothing is lost:
        the next commit covers it again)."""

    def committed(self) -> dict[PartitionId, int]:
        """The last committed offset per partition (empty for sources without offsets)."""

    def backlog(self, ends: Mapping[PartitionId, int]) -> tuple[PartitionBacklog, ...] | None:
        """What is left to do in each owned partition whose log end is in ``ends``: the
        figures ``laneway lag`` shows, as this consumer knows them now (``None`` for a
        source without offsets: a share group acknowledges records one by one)."""
