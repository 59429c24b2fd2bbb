"""What a consumer-group member learns about its partitions' positions from its
confluent-kafka client: the committed offsets (and metadata) it starts from on assignment,
and, without a request, the high watermarks of the latest fetch responses, behind the
unread counts and log ends that lag is computed from.

Used by :class:`~laneway.sources.kafka.source.KafkaSource` and its
:class:`~laneway.sources.kafka.assignment.Assignment`, which pass only partitions owned.
"""

from __future__ import annotations

from collections.abc import Mapping

from confluent_kafka import Consumer, KafkaException, TopicPartition

from laneway.errors import SourceError
from laneway.sources.kafka.client_logs import describe, describe_error
from laneway.types import CommitPosition, PartitionId

COMMITTED_TIMEOUT_S = 10.0
"""How long the assignment callback waits for the group coordinator's committed offsets."""


def committed_positions(
    consumer: Consumer, partitions: list[TopicPartition], name: str
) -> dict[PartitionId, CommitPosition | None]:
    """The group's committed position of each of ``partitions`` (``None`` where nothing is
    committed); a failed read raises :class:`SourceError` naming the source ``name``."""
    query = [TopicPartition(tp.topic, tp.partition) for tp in partitions]
    try:
        found = consumer.committed(query, timeout=COMMITTED_TIMEOUT_S)
    except KafkaException as exc:
        raise SourceError(f"{name}: reading committed offsets failed: {describe(exc)}") from exc
    positions: dict[PartitionId, CommitPosition | None] = {}
    for tp in found:
        if tp.error is not None:
            raise SourceError(
                f"{name}: reading the committed offset of {tp.topic}[{tp.partition}] "
                f"failed: {describe_error(tp.error)}"
            )
        positions[(tp.topic, tp.partition)] = (
            CommitPosition(tp.offset, tp.metadata or "", tp.leader_epoch)
            if tp.offset >= 0
            else None
        )
    return positions


def committed_partition(pid: PartitionId, position: CommitPosition) -> TopicPartition:
    """The TopicPartition that commits ``position`` of ``pid``: offset, metadata and the
    leader epoch of the record before the offset (Kafka's committed leader epoch, which
    librdkafka validates when it seeks there: KIP-320), when known."""
    epoch = -1 if position.leader_epoch is None else position.leader_epoch
    return TopicPartition(pid[0], pid[1], position.offset, position.metadata, epoch)


def unread_counts(
    consumer: Consumer, partitions: list[PartitionId], starts: Mapping[PartitionId, int]
) -> dict[PartitionId, int]:
    """Messages of each partition beyond the client's position (where nothing was returned
    yet, beyond ``starts``, the committed offset fetching began at), by the cached high
    watermark; 0 until the partition has been fetched once."""
    try:
        positions = consumer.position([TopicPartition(*pid) for pid in partitions])
    except KafkaException:
        return dict.fromkeys(partitions, 0)
    counts: dict[PartitionId, int] = {}
    for at in positions:
        pid = (at.topic, at.partition)
        high = _cached_high(consumer, at)
        start = at.offset if at.offset >= 0 else starts.get(pid, 0)
        counts[pid] = max(0, high - start) if high >= 0 else 0
    return counts


def cached_log_ends(consumer: Consumer, partitions: list[PartitionId]) -> dict[PartitionId, int]:
    """The cached high watermark of each of ``partitions`` fetched at least once (no
    request; the others are left out)."""
    ends: dict[PartitionId, int] = {}
    for pid in partitions:
        high = _cached_high(consumer, TopicPartition(*pid))
        if high >= 0:
            ends[pid] = high
    return ends


def _cached_high(consumer: Consumer, partition: TopicPartition) -> int:
    """The high watermark of the client's latest fetch response for ``partition``; -1 when
    it has none (not fetched yet, or the client cannot say)."""
    try:
        _, high = consumer.get_watermark_offsets(partition, cached=True)
    except KafkaException:
        return -1
    return int(high)
