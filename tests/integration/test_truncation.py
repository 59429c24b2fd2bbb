"""Truncation caught by leader epochs: a real unclean leader election on the three-broker
cluster cuts a log that laneway had read and committed, the log is written again from the
cut, and the next consumer processes every record written after the cut, wherever it
starts: beyond its commit point (claims in the metadata about records that are gone) and
below it (a commit point past the cut).

The scenario, on topics replicated on brokers 1 and 2 with unclean leader election
allowed: broker 2 is killed, records 10-14 are written to broker 1 alone and a laneway
consumer reads them; broker 1 is frozen before anything reaches broker 2, broker 2 comes
back and is elected leader uncleanly (its log ends at 10), records 10-14 are written anew,
and broker 1, back too, cuts its log to match. A third topic has a hand-made commit whose
metadata claims offset 12 finished while its log ended at 10: records written there after
a leader change are processed as well.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time

import pytest
from cluster import KafkaCluster, wait_for
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from kafka_helpers import committed_offsets, unique_name

import laneway
from laneway.offsets.codec import decode, encode_window
from laneway.types import Message

pytestmark = pytest.mark.cluster

UNCLEAN = {"unclean.leader.election.enable": "true", "min.insync.replicas": "1"}
FAST = {"session.timeout.ms": 6000, "heartbeat.interval.ms": 500}


def produce(bootstrap: str, topic: str, values: list[str]) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    for value in values:
        producer.produce(topic, value.encode(), key=value.encode(), partition=0)
    assert producer.flush(60.0) == 0, f"could not write to {topic}"


def epoch_of_last(bootstrap: str, topic: str) -> int:
    """The leader epoch of the last record of partition 0."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": unique_name("peek")})
    try:
        _, high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
        consumer.assign([TopicPartition(topic, 0, high - 1)])
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            for record in consumer.consume(1, 1.0):
                if record.error() is None:
                    epoch = record.leader_epoch()
                    assert epoch is not None
                    return epoch
        raise AssertionError(f"could not read the last record of {topic}")
    finally:
        consumer.close()


def hand_commit(bootstrap: str, group: str, topic: str, offset: int, metadata: str) -> None:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        [done] = consumer.commit(
            offsets=[TopicPartition(topic, 0, offset, metadata)], asynchronous=False
        )
        assert done.error is None
    finally:
        consumer.close()


def elect(cluster: KafkaCluster, topics: list[str], leader: int) -> None:
    """Wait until ``leader`` leads partition 0 of every topic, asking for unclean elections."""

    def led() -> bool:
        missing = [t for t in topics if cluster.leader(t) != leader]
        for topic in missing:
            # Refused while the old leader is not fenced yet, or done meanwhile.
            with contextlib.suppress(KafkaException, TimeoutError):
                cluster.elect_unclean(topic, 0)
        return not missing

    wait_for(f"broker {leader} to lead {topics}", led, timeout_s=120.0)


def consume_holding(
    bootstrap: str, group: str, topics: list[str], held: set[tuple[str, int]]
) -> set[tuple[str, int]]:
    """Run laneway until everything but ``held`` is committed beyond, then stop it with
    those still in their handler; return what it finished."""
    release = threading.Event()
    finished: set[tuple[str, int]] = set()

    def handle(message: Message) -> None:
        if (message.topic, message.offset) in held:
            release.wait(60)
        else:
            finished.add((message.topic, message.offset))

    consumer = laneway.Consumer(
        laneway.KafkaSource(bootstrap, group, topics, FAST),
        handle,
        engine="thread",
        ordering="unordered",
        concurrency=8,
        commit_interval=0.1,
        drain_timeout=0.5,
        handle_signals=False,
    )
    runner = threading.Thread(target=consumer.run)
    runner.start()
    try:
        wanted = {(t, o) for t in topics for o in range(15)} - held

        def all_but_held_committed() -> bool:
            if not wanted <= finished:
                return False
            commits = {t: committed_offsets(bootstrap, group, t).get(0) for t in topics}
            return all(
                c is not None and c[0] == min(o for tt, o in held if tt == t) and c[1]
                for t, c in commits.items()
            )

        wait_for("the first consumer's commits", all_but_held_committed, timeout_s=60.0)
    finally:
        consumer.stop()
        runner.join(30)
        release.set()
    assert not runner.is_alive()
    return finished


def test_records_written_after_a_truncation_are_processed_wherever_the_consumer_starts(
    kafka_cluster: KafkaCluster, caplog: pytest.LogCaptureFixture
) -> None:
    cluster = kafka_cluster
    bootstrap = cluster.bootstrap
    claims = cluster.create_topic(prefix="cut-claims", config=UNCLEAN, replicas=[[1, 2]])
    commit = cluster.create_topic(prefix="cut-commit", config=UNCLEAN, replicas=[[1, 2]])
    hand = cluster.create_topic(prefix="cut-hand", config=UNCLEAN, replicas=[[1, 2]])
    group = unique_name("truncated")
    for topic in (claims, commit, hand):
        assert cluster.leader(topic) == 1
        produce(bootstrap, topic, [f"old-{i}" for i in range(10)])
    # A claim made by hand about offset 12 while the log ends at 10, in the leader's epoch.
    epoch = epoch_of_last(bootstrap, hand)
    forged = f"lw2:b:10:{epoch}:Ag"  # offset 12 (bit 1 of the window after 10)
    assert encode_window(10, b"\x00\x01", [(0, epoch)]) == forged
    hand_commit(bootstrap, group, hand, 10, forged)
    try:
        cluster.kill(2)
        for topic in (claims, commit):
            cluster.wait_isr(topic, 0, {1})
            produce(bootstrap, topic, [f"old-{i}" for i in range(10, 15)])
        # laneway reads 0-14 of both; 10 stays in its handler on one topic (claims 11-14
        # finished beyond the commit point 10), 13 on the other (commit point 13).
        first = consume_holding(bootstrap, group, [claims, commit], {(claims, 10), (commit, 13)})
        assert len(first) == 28
        claimed = committed_offsets(bootstrap, group, claims)[0]
        assert claimed[0] == 10
        assert decode(claimed[1], 10) == {11, 12, 13, 14}
        assert claimed[1].startswith("lw2:"), "claims with their epoch"
        # Broker 1 stops before broker 2 can copy 10-14; 2 leads with a log ending at 10.
        cluster.freeze(1)
        cluster.restart(2)
        elect(cluster, [claims, commit, hand], leader=2)
        for topic in (claims, commit, hand):
            produce(bootstrap, topic, [f"new-{i}" for i in range(10, 15)])
        cluster.kill(1)
        cluster.restart(1)
        for topic in (claims, commit, hand):
            cluster.wait_isr(topic, 0, {1, 2})
    finally:
        cluster.heal()

    handled: list[tuple[str, int, bytes | None]] = []
    consumer = laneway.Consumer(
        laneway.KafkaSource(bootstrap, group, [claims, commit, hand], FAST),
        lambda m: handled.append((m.topic, m.offset, m.value)),
        engine="sync",
        handle_signals=False,
    )
    with caplog.at_level(logging.WARNING):
        consumer.run(idle_timeout=5.0)
    new = [(o, f"new-{o}".encode()) for o in range(10, 15)]
    for topic in (claims, commit, hand):
        assert [(o, v) for t, o, v in handled if t == topic] == new, f"{topic}: skipped"
    refused = [
        r.getMessage() for r in caplog.records if "now are of another epoch" in r.getMessage()
    ]
    assert sorted(m.split("[")[0] for m in refused) == sorted([claims, hand]), refused
    assert f"{commit}[0]: the log was cut at offset 10" in caplog.text
    assert "the commit point moves back from 13" in caplog.text
    for topic in (claims, commit, hand):
        assert committed_offsets(bootstrap, group, topic)[0][0] == 15
