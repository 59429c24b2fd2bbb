"""Synchronous offset commits that ride out a new member epoch (``group.protocol=consumer``).

Under KIP-848 the group coordinator checks every OffsetCommit against the member's current
*epoch*, which it bumps whenever it moves the member to a new assignment (partitions added,
or a revocation acknowledged). A commit sent just before the heartbeat response that brings
the new epoch reaches the coordinator with the old one and fails with
``STALE_MEMBER_EPOCH``, though the member still owns every partition in it. librdkafka
retries its own automatic commits after the next heartbeat, but not an application's
commit: ``rd_kafka_commit`` documents the error as retriable and leaves the retry to the
caller. In a rebalance that is nearly every member's timed commit, and a commit on
revocation that failed this way would hand the partition over without it (the next
owner would run the finished messages again).

So :func:`commit_offsets` commits again, the same offsets, until the epoch is current:
librdkafka hastens its next heartbeat on this error and updates the epoch from the
response on its own thread, so the retry needs no poll. The retry is as safe as the first
try: a partition being revoked keeps its owner's epoch until the revocation is
acknowledged (in a later poll), and a member that is no longer in the group gets
``UNKNOWN_MEMBER_ID`` or ``FENCED_MEMBER_EPOCH``, never this error.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

from laneway.logs import get_logger
from laneway.sources.kafka.client_logs import describe
from laneway.types import CommitPosition, PartitionId

log = get_logger(__name__)

STALE_MEMBER_EPOCH = KafkaError.STALE_MEMBER_EPOCH
RETRY_FOR = 5.0
"""Seconds a commit is tried again while it fails with ``STALE_MEMBER_EPOCH`` (a
heartbeat round trip is milliseconds; the broker's heartbeat interval, 5 s by default,
bounds it when the hastened heartbeat is lost)."""
FIRST_WAIT = 0.005
"""Seconds before the first retry; doubled per retry, up to ``LONGEST_WAIT``."""
LONGEST_WAIT = 0.2


def commit_offsets(
    consumer: Consumer,
    offsets: list[TopicPartition],
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> list[TopicPartition]:
    """``consumer.commit(offsets, asynchronous=False)``, again while the whole commit or a
    partition of it fails with ``STALE_MEMBER_EPOCH``, for up to ``RETRY_FOR`` seconds.
    Returns the partitions as the last try answered (errors in them for the caller);
    raises the last try's ``KafkaException``."""
    deadline = clock() + RETRY_FOR
    wait = FIRST_WAIT
    tries = 1
    while True:
        try:
            results: list[TopicPartition] = consumer.commit(offsets=offsets, asynchronous=False)
        except KafkaException as exc:
            if not _stale(exc.args[0] if exc.args else None) or clock() + wait > deadline:
                raise
        else:
            if not any(_stale(tp.error) for tp in results) or clock() + wait > deadline:
                if tries > 1:
                    log.debug("commit went through at try %d (new member epoch)", tries)
                return results
        sleep(wait)
        wait = min(LONGEST_WAIT, wait * 2)
        tries += 1


def _stale(error: object) -> bool:
    return isinstance(error, KafkaError) and error.code() == STALE_MEMBER_EPOCH


def commit_failure(
    name: str, exc: KafkaException, positions: Mapping[PartitionId, CommitPosition]
) -> str:
    """What to say of a commit of ``positions`` by source ``name`` that raised ``exc``
    (with the figures when the commit metadata was too large for the broker)."""
    message = f"{name}: commit of {sorted(positions)} failed: {describe(exc)}"
    error = exc.args[0] if exc.args else None
    if isinstance(error, KafkaError) and error.code() == KafkaError.OFFSET_METADATA_TOO_LARGE:
        size, where = max((len(pos.metadata.encode()), p) for p, pos in positions.items())
        message += (
            f"; the largest commit metadata is {size} bytes (partition {where}), more than "
            "the broker's offset.metadata.max.bytes allows (4096 by default)"
        )
    return message
