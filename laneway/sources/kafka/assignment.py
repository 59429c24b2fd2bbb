"""The partitions a KafkaSource member owns, kept in step with librdkafka's rebalance callbacks.

librdkafka invokes the callbacks on the source's thread, from inside ``consume()`` and
``close()``. :class:`Assignment` turns them into the listener's ``on_assigned``,
``on_revoked`` and ``on_lost`` calls and keeps what the source's other methods check: the
owned partitions (only those may be committed, paused or measured), which of them are
paused, and the committed offsets fetching began at.

Nothing raised in a callback unwinds through librdkafka (an exception crossing its rebalance
handling can leave the client unable to close): the callback keeps it and returns, and
the source raises it once ``consume()`` is over (:meth:`Assignment.raise_failure`), with
the partitions assigned as librdkafka expects, so closing the source revokes them normally.
"""

from __future__ import annotations

from collections.abc import Iterable

from confluent_kafka import Consumer, KafkaException, TopicPartition

from laneway.logs import get_logger
from laneway.sources.base import RebalanceListener
from laneway.sources.kafka.client_logs import describe
from laneway.sources.kafka.deleted_records import DeletedRecords
from laneway.sources.kafka.positions import committed_partition, committed_positions
from laneway.sources.kafka.starts import trusted_starts
from laneway.sources.kafka.topic_watch import TopicWatch
from laneway.types import CommitPosition, PartitionId

# The source's own logger: these lines are about the KafkaSource, not this helper.
logger = get_logger("laneway.sources.kafka.source")


class Assignment:
    """What a :class:`~laneway.sources.kafka.source.KafkaSource` owns, and its listener.

    ``listener`` is ``None`` until the source is opened; until then nothing is reported.
    :meth:`on_assign`, :meth:`on_revoke` and :meth:`on_lost` are the ``subscribe()``
    callbacks. ``name`` names the source in log lines and errors; ``incremental`` says the
    assignment strategy is cooperative (assignments add to the owned partitions); ``reset``
    is the client's ``auto.offset.reset``, applied where a committed offset lies beyond the
    log end (see :mod:`laneway.sources.kafka.starts`).
    """

    def __init__(
        self,
        name: str,
        incremental: bool,
        reset: str = "earliest",
        deleted: DeletedRecords | None = None,
    ) -> None:
        self.listener: RebalanceListener | None = None
        self.owned: set[PartitionId] = set()
        self.starts: dict[PartitionId, int] = {}  # committed offsets fetching began at
        self.paused: set[PartitionId] = set()
        self.closing = False
        self.watch: TopicWatch | None = None
        """The source's watch of missing topics, told of assignments."""
        self._name = name
        self._incremental = incremental
        self._reset = reset  # auto.offset.reset
        self._deleted = DeletedRecords(name, reset) if deleted is None else deleted
        self._failure: BaseException | None = None

    def raise_failure(self) -> None:
        """Raise what a callback raised since the last call, if anything (see the module
        docs)."""
        failure, self._failure = self._failure, None
        if failure is not None:
            raise failure

    def _kept(self, error: BaseException) -> None:
        if self._failure is None:
            self._failure = error

    def on_assign(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        try:
            self._assign(consumer, partitions)
        except BaseException as error:  # raised from poll(), not through librdkafka
            self._kept(error)

    def _assign(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        if self.closing:
            # An assignment still queued when close() started: librdkafka treats it as an
            # unassign (the library's fallback assign call); the listener is not told.
            return
        positions = committed_positions(consumer, partitions, self._name) if partitions else {}
        # Checked against the log ends (see starts.py), then assigned with explicit
        # offsets: fetching starts exactly at the positions the listener is told about;
        # OFFSET_INVALID (nothing committed) lets auto.offset.reset decide.
        positions, start = trusted_starts(
            consumer, positions, self._name, self._reset, self._deleted
        )
        if self._incremental:
            consumer.incremental_assign(start)
        else:
            consumer.assign(start)
        if start:
            # librdkafka keeps a partition's pause flag across unassign/assign; a partition
            # newly assigned to this member starts unpaused, as the listener expects.
            consumer.resume(start)
            self._validate(consumer, start, positions)
        self.owned.update(positions)
        if self.watch is not None:
            self.watch.assigned({topic for topic, _ in positions})
        for pid, pos in positions.items():
            if pos is None:
                self.starts.pop(pid, None)
            else:
                self.starts[pid] = pos.offset
        if positions and self.listener is not None:
            logger.debug("%s: assigned %s", self._name, sorted(positions))
            self.listener.on_assigned(positions)

    def _validate(
        self,
        consumer: Consumer,
        start: list[TopicPartition],
        positions: dict[PartitionId, CommitPosition | None],
    ) -> None:
        """Seek each partition whose committed position carries a leader epoch to it again,
        with the epoch: librdkafka validates a position it seeks to (KIP-320: it asks the
        leader where that epoch ends) but not one it is assigned at, and moves back to where
        the logs part when the log was cut below the position and written again (records
        there would be skipped otherwise). The offset progress then sees records below the
        committed offset of a newer epoch and processes them (see
        :meth:`~laneway.offsets.tracker.PartitionOffsets.diverges`)."""
        for tp in start:
            position = positions.get((tp.topic, tp.partition))
            if position is None or position.leader_epoch is None or tp.offset < 0:
                continue
            try:
                consumer.seek(committed_partition((tp.topic, tp.partition), position))
            except KafkaException as exc:
                logger.warning(
                    "%s: %s[%d] starts at %d unvalidated (seek with its leader epoch %d "
                    "failed: %s)",
                    self._name,
                    tp.topic,
                    tp.partition,
                    tp.offset,
                    position.leader_epoch,
                    describe(exc),
                )

    def on_revoke(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        try:
            self._give_up(partitions, lost=False)
        except BaseException as error:  # raised from poll(), not through librdkafka
            self._kept(error)

    def on_lost(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        try:
            self._give_up(partitions, lost=True)
        except BaseException as error:  # raised from poll(), not through librdkafka
            self._kept(error)

    def close(self) -> None:
        """For the source's ``close()``: ignore assignments from now on, revoke the owned
        partitions through the listener (still owned while it runs), then forget them."""
        self.closing = True
        owned = sorted(self.owned)
        try:
            if owned and self.listener is not None:
                self.listener.on_revoked(owned)
        finally:
            self.forget(owned)

    def lose_all(self) -> None:
        """Forget every owned partition, then report them to the listener's ``on_lost``."""
        owned = sorted(self.owned)
        self.forget(owned)
        if owned and self.listener is not None:
            self.listener.on_lost(owned)

    def lose_topics(self, topics: Iterable[str]) -> list[PartitionId]:
        """Give up the owned partitions of ``topics`` (deleted from the cluster, so nothing
        of theirs can be committed) through the listener's ``on_lost``; return them."""
        wanted = set(topics)
        ids = sorted(pid for pid in self.owned if pid[0] in wanted)
        self.forget(ids)  # librdkafka revokes them too, at the rebalance the watch starts
        if ids and self.listener is not None:
            self.listener.on_lost(ids)
        return ids

    def forget(self, ids: Iterable[PartitionId]) -> None:
        for pid in ids:
            self.owned.discard(pid)
            self.paused.discard(pid)
            self.starts.pop(pid, None)

    def _give_up(self, partitions: list[TopicPartition], lost: bool) -> None:
        # Only partitions the listener was told about (close() has already revoked its own).
        ids = [
            (tp.topic, tp.partition) for tp in partitions if (tp.topic, tp.partition) in self.owned
        ]
        if not ids or self.listener is None:
            return
        if lost:
            # Already taken away: no longer owned, so a commit for them fails fast.
            self.forget(ids)
            logger.warning("%s: partitions lost: %s", self._name, ids)
            self.listener.on_lost(ids)
            return
        try:
            # Still owned while the listener runs: its commits for them count.
            logger.debug("%s: revoked %s", self._name, ids)
            self.listener.on_revoked(ids)
        finally:
            self.forget(ids)
