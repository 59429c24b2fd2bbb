"""What a rebalance listener raises never leaves a KafkaSource open.

librdkafka runs the rebalance callbacks inside ``consume()``; an exception crossing its
rebalance handling left, in some runs, a client whose close then waited for good (issue
48). The source keeps what a callback raised, raises it from ``poll()`` once ``consume()``
is over, and closes normally: the partitions it was told about are revoked through the
listener, the member leaves the group at once (the next member is given every partition
without waiting for a session to time out), and close() is bounded (the frozen-broker case
is in tests/chaos/test_chaos_broker.py).
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence

import pytest
from kafka_helpers import create_topic, unique_name

from laneway.sources.base import IgnoreRebalances
from laneway.sources.kafka.source import KafkaSource
from laneway.types import CommitPosition, PartitionId

pytestmark = pytest.mark.kafka

PARTITIONS = 3


class Refusing(IgnoreRebalances):
    """A listener whose ``on_assigned`` raises (a state file that cannot be opened, say)."""

    def __init__(self) -> None:
        self.assigned: list[PartitionId] = []
        self.revoked: list[PartitionId] = []

    def on_assigned(self, positions: Mapping[PartitionId, CommitPosition | None]) -> None:
        self.assigned += sorted(positions)
        raise RuntimeError("the state of a partition cannot be opened")

    def on_revoked(self, partitions: Sequence[PartitionId]) -> None:
        self.revoked += sorted(partitions)


class Taking(IgnoreRebalances):
    def __init__(self) -> None:
        self.assigned: set[PartitionId] = set()

    def on_assigned(self, positions: Mapping[PartitionId, CommitPosition | None]) -> None:
        self.assigned |= set(positions)


@pytest.mark.parametrize("protocol", ["classic", "consumer"])
def test_an_error_in_on_assigned_is_raised_by_poll_and_the_member_leaves_cleanly(
    kafka_bootstrap: str, protocol: str
) -> None:
    topic, group = unique_name("refused"), unique_name("g")
    create_topic(kafka_bootstrap, topic, PARTITIONS)
    config = {"group.protocol": protocol}
    if protocol == "classic":
        config |= {"session.timeout.ms": 45_000, "heartbeat.interval.ms": 300}
    source = KafkaSource(kafka_bootstrap, group, [topic], config)
    refusing = Refusing()
    source.open(refusing)
    deadline = time.monotonic() + 30.0
    with pytest.raises(RuntimeError, match="cannot be opened"):
        while time.monotonic() < deadline:
            source.poll(100, 0.2)
    began = time.monotonic()
    source.close()
    assert time.monotonic() - began < 5.0
    assert refusing.revoked == refusing.assigned == [(topic, p) for p in range(PARTITIONS)]
    # The member left: the next one gets every partition long before a 45 s session ends.
    other = KafkaSource(kafka_bootstrap, group, [topic], config)
    taking = Taking()
    other.open(taking)
    deadline = time.monotonic() + 20.0
    while len(taking.assigned) < PARTITIONS and time.monotonic() < deadline:
        other.poll(100, 0.2)
    other.close()
    assert taking.assigned == {(topic, p) for p in range(PARTITIONS)}
