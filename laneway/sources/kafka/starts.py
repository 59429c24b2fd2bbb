"""Where a Kafka group member starts fetching a newly assigned partition.

At every assignment the :class:`~laneway.sources.kafka.assignment.Assignment` reads the
group's committed positions; before they are used, this module asks the partition leaders
for the log ends (one ListOffsets request per leader, however many partitions) and checks
each position against its end (:func:`laneway.offsets.log_end.trusted_position`): finished
offsets in the commit metadata at or past the end are dropped, and a committed offset past
the end (a log truncated by an unclean leader election, or an offset committed by hand) is
not used. librdkafka would meet such an offset as out of range on its first fetch and apply
``auto.offset.reset``; the partition is assigned at that reset position at once instead, so
that no record written meanwhile between the end and the stale offset is skipped.
"""

from __future__ import annotations

from collections.abc import Mapping

from confluent_kafka import (
    OFFSET_BEGINNING,
    OFFSET_END,
    OFFSET_INVALID,
    Consumer,
    KafkaException,
    TopicPartition,
)

from laneway.errors import SourceError
from laneway.offsets.log_end import trusted_position
from laneway.sources.kafka.client_logs import describe, describe_error
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


def trusted_starts(
    consumer: Consumer,
    positions: Mapping[PartitionId, CommitPosition | None],
    name: str,
    reset: str,
) -> tuple[dict[PartitionId, CommitPosition | None], list[TopicPartition]]:
    """The positions to report to the listener and the partitions to assign, at the
    offsets to fetch from, for the committed ``positions`` (``None``: nothing committed)
    of the source ``name`` whose ``auto.offset.reset`` is ``reset``."""
    committed = [pid for pid, position in positions.items() if position is not None]
    ends = log_ends_now(consumer, committed, name) if committed else {}
    trusted: dict[PartitionId, CommitPosition | None] = {}
    start: list[TopicPartition] = []
    for (topic, partition), position in positions.items():
        checked = None
        offset = OFFSET_INVALID  # nothing committed: auto.offset.reset decides
        if position is not None:
            fallback = f"reading starts where auto.offset.reset={reset} says"
            where = f"{name}: {topic}[{partition}]"
            checked = trusted_position(where, position, ends[(topic, partition)], fallback)
            offset = position.offset if checked is None else checked.offset
            if checked is None:
                offset = RESET_OFFSETS.get(reset.lower(), offset)
        trusted[(topic, partition)] = checked
        start.append(TopicPartition(topic, partition, offset))
    return trusted, start


def log_ends_now(
    consumer: Consumer, partitions: list[PartitionId], name: str
) -> dict[PartitionId, int]:
    """The end offset of each of ``partitions``, asked of their leaders now (the end a
    ``read_committed`` consumer may read to, with that isolation level); a failure raises
    :class:`SourceError`, as a failed read of the committed offsets does."""
    query = [TopicPartition(topic, partition, OFFSET_END) for topic, partition in partitions]
    try:
        found = consumer.offsets_for_times(query, timeout=COMMITTED_TIMEOUT_S)
    except KafkaException as exc:
        raise SourceError(f"{name}: reading the log ends failed: {describe(exc)}") from exc
    ends: dict[PartitionId, int] = {}
    for tp in found:
        if tp.error is not None or tp.offset < 0:
            problem = describe_error(tp.error) if tp.error is not None else f"offset {tp.offset}"
            raise SourceError(
                f"{name}: reading the log end of {tp.topic}[{tp.partition}] failed: {problem}"
            )
        ends[(tp.topic, tp.partition)] = tp.offset
    return ends
