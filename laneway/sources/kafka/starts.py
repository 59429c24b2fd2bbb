"""Where a Kafka group member starts fetching a newly assigned partition.

At every assignment the :class:`~laneway.sources.kafka.assignment.Assignment` reads the
group's committed positions; before they are used, this module asks the partition leaders
for the log ends (one ListOffsets request per leader, however many partitions) and checks
each position against its end (:func:`laneway.offsets.log_end.trusted_position`): finished
offsets in the commit metadata at or past the end are dropped, and a committed offset past
the end (a log truncated by an unclean leader election, or an offset committed by hand) is
not used. librdkafka would meet such an offset as out of range on its first fetch and apply
``auto.offset.reset``; the partition is assigned at that reset position at once instead, so
that no record written meanwhile between the end and the stale offset is skipped. A committed
offset below the log start (its records deleted before the group read them) is not used either,
with a WARNING and a count of the records lost (see
:mod:`laneway.sources.kafka.deleted_records`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping

from confluent_kafka import (
    OFFSET_BEGINNING,
    OFFSET_END,
    OFFSET_INVALID,
    Consumer,
    KafkaError,
    KafkaException,
    TopicPartition,
)

from laneway.errors import SourceError
from laneway.offsets.log_end import trusted_position
from laneway.sources.kafka.client_logs import describe, describe_error, kafka_error
from laneway.sources.kafka.deleted_records import DeletedRecords
from laneway.sources.kafka.positions import COMMITTED_TIMEOUT_S
from laneway.types import CommitPosition, PartitionId

RESET_OFFSETS = {
    "smallest": OFFSET_BEGINNING,
    "earliest": OFFSET_BEGINNING,
    "beginning": OFFSET_BEGINNING,
    "largest": OFFSET_END,
    "latest": OFFSET_END,
    "end": OFFSET_END,
}
"""librdkafka's ``auto.offset.reset`` values and the logical offset each resets to (with
``error`` the stale offset is assigned and librdkafka reports it out of range)."""
RETRY_WAIT_S = 0.1
"""The first wait before asking again for log ends whose leader is moving (doubling to 1 s)."""
LEADER_MOVING = frozenset(
    {
        KafkaError.FENCED_LEADER_EPOCH,
        KafkaError.UNKNOWN_LEADER_EPOCH,
        KafkaError.NOT_LEADER_FOR_PARTITION,
        KafkaError.LEADER_NOT_AVAILABLE,
        KafkaError.REPLICA_NOT_AVAILABLE,
        KafkaError.OFFSET_NOT_AVAILABLE,
        KafkaError.KAFKA_STORAGE_ERROR,
        KafkaError.REQUEST_TIMED_OUT,
        KafkaError._TIMED_OUT,
        KafkaError._TRANSPORT,
    }
)
"""Errors of a log-end request that a broker restart or a leader election causes, and that
pass once the partition has a leader again (librdkafka does not flag them retriable)."""


def trusted_starts(
    consumer: Consumer,
    positions: Mapping[PartitionId, CommitPosition | None],
    name: str,
    reset: str,
    deleted: DeletedRecords,
) -> tuple[dict[PartitionId, CommitPosition | None], list[TopicPartition]]:
    """The positions to report to the listener and the partitions to assign, at the
    offsets to fetch from, for the committed ``positions`` (``None``: nothing committed)
    of the source ``name`` whose ``auto.offset.reset`` is ``reset``; a committed offset
    below the log start goes to ``deleted``."""
    committed = [pid for pid, position in positions.items() if position is not None]
    ends = log_ends_now(consumer, committed, name) if committed else {}
    starts = log_ends_now(consumer, committed, name, which=OFFSET_BEGINNING) if committed else {}
    trusted: dict[PartitionId, CommitPosition | None] = {}
    start: list[TopicPartition] = []
    for (topic, partition), position in positions.items():
        checked = None
        offset = OFFSET_INVALID  # nothing committed: auto.offset.reset decides
        if position is not None:
            fallback = f"reading starts where auto.offset.reset={reset} says"
            where = f"{name}: {topic}[{partition}]"
            checked = trusted_position(where, position, ends[(topic, partition)], fallback)
            pid = (topic, partition)
            if checked is not None and not deleted.checked_start(
                where, pid, checked.offset, starts[pid]
            ):
                checked = None
            offset = position.offset if checked is None else checked.offset
            if checked is None:
                offset = RESET_OFFSETS.get(reset.lower(), offset)
        trusted[(topic, partition)] = checked
        start.append(TopicPartition(topic, partition, offset))
    return trusted, start


def log_ends_now(
    consumer: Consumer,
    partitions: list[PartitionId],
    name: str,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
    *,
    which: int = OFFSET_END,
) -> dict[PartitionId, int]:
    """The end offset of each of ``partitions`` (``which=OFFSET_BEGINNING``: the log start),
    asked of their leaders now (the end a ``read_committed`` consumer may read to, with that
    isolation level). A partition whose
    leader is moving (``FENCED_LEADER_EPOCH``, ``NOT_LEADER_OR_FOLLOWER``, any retriable
    error: a broker restarting, a leader election) is asked again, for up to
    :data:`~laneway.sources.kafka.positions.COMMITTED_TIMEOUT_S` in all; another failure,
    or one that outlasts that, raises :class:`SourceError`, as a failed read of the
    committed offsets does."""
    deadline = clock() + COMMITTED_TIMEOUT_S
    ends: dict[PartitionId, int] = {}
    pending = list(partitions)
    wait = RETRY_WAIT_S
    while True:
        query = [TopicPartition(topic, partition, which) for topic, partition in pending]
        left = max(0.1, deadline - clock())
        try:
            found = consumer.offsets_for_times(query, timeout=left)
        except KafkaException as exc:
            error = kafka_error(exc)
            if error is None or not _passing(error) or clock() + wait > deadline:
                raise SourceError(f"{name}: reading the log ends failed: {describe(exc)}") from exc
            found = []
        retry: list[PartitionId] = [] if found else pending
        for tp in found:
            if tp.error is not None and _passing(tp.error) and clock() + wait <= deadline:
                retry.append((tp.topic, tp.partition))
            elif tp.error is not None or tp.offset < 0:
                problem = (
                    describe_error(tp.error) if tp.error is not None else f"offset {tp.offset}"
                )
                raise SourceError(
                    f"{name}: reading the log end of {tp.topic}[{tp.partition}] failed: {problem}"
                )
            else:
                ends[(tp.topic, tp.partition)] = tp.offset
        if not retry:
            return ends
        pending = retry
        sleep(wait)
        wait = min(wait * 2, 1.0)


def _passing(error: KafkaError) -> bool:
    return error.retriable() or error.code() in LEADER_MOVING
