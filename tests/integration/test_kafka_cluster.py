"""Tests of the three-broker cluster of `scripts/kafka start --brokers 3` (the `kafka_cluster`
fixture): three brokers that replicate, and one broker killed, frozen, thawed and restarted
by id while the other two carry on."""

from __future__ import annotations

import time

import pytest
from cluster import KafkaCluster, wait_for
from confluent_kafka import Producer
from kafka_helpers import end_offsets, read_records, run_kafka_script

pytestmark = pytest.mark.cluster


def produce_all(bootstrap: str, topic: str, count: int, tag: str) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    for i in range(count):
        producer.produce(topic, f"{tag}-{i}".encode(), key=str(i).encode())
    assert producer.flush(60.0) == 0


def test_three_brokers_replicate_every_topic(kafka_cluster: KafkaCluster) -> None:
    metadata = kafka_cluster.admin.list_topics(timeout=10)
    assert sorted(metadata.brokers) == [1, 2, 3]
    assert {f"{b.host}:{b.port}" for b in metadata.brokers.values()} == set(
        kafka_cluster.bootstrap.split(",")
    )
    assert kafka_cluster.states() == {1: "running", 2: "running", 3: "running"}
    topic = kafka_cluster.create_topic(partitions=3)
    for partition in range(3):
        _, replicas, isr = kafka_cluster.partition(topic, partition)
        assert sorted(replicas) == [1, 2, 3] and sorted(isr) == [1, 2, 3]
    status = run_kafka_script("status", timeout_s=30.0, arguments=["--brokers", "3"])
    assert (status.returncode, status.stdout.strip()) == (0, kafka_cluster.bootstrap)


def test_a_killed_leader_is_replaced_and_comes_back_on_its_storage(
    kafka_cluster: KafkaCluster,
) -> None:
    topic = kafka_cluster.create_topic()
    produce_all(kafka_cluster.bootstrap, topic, 50, "before")
    leader = kafka_cluster.leader(topic)
    kafka_cluster.kill(leader)
    try:
        assert kafka_cluster.states()[leader] == "down"
        new_leader = kafka_cluster.wait_leader(topic, 0, not_on=leader)
        # acks=all with min.insync.replicas=2: the two brokers left take writes.
        produce_all(kafka_cluster.bootstrap, topic, 50, "during")
        assert end_offsets(kafka_cluster.bootstrap, topic) == {0: 100}
    finally:
        kafka_cluster.restart(leader)
    assert kafka_cluster.states()[leader] == "running"
    kafka_cluster.wait_isr(topic, 0, {1, 2, 3})
    values = [r.value for r in read_records(kafka_cluster.bootstrap, topic, count=100)]
    assert values == [f"before-{i}".encode() for i in range(50)] + [
        f"during-{i}".encode() for i in range(50)
    ]
    assert new_leader != leader


def test_a_frozen_controller_holds_nothing_up_and_thaws(kafka_cluster: KafkaCluster) -> None:
    # The worst broker to freeze is the active controller: the quorum elects another, which
    # fences the frozen broker; and a new idempotent producer needs a producer id, which a
    # broker gets from the controller in blocks (waiting controller.socket.timeout.ms on the
    # frozen one: 30 s by Kafka's default, 5 s in the test cluster).
    frozen = kafka_cluster.controller()
    leader = next(b for b in (1, 2, 3) if b != frozen)
    topic = kafka_cluster.create_topic(replicas=[[leader, *({1, 2, 3} - {leader})]])
    assert kafka_cluster.leader(topic) == leader
    kafka_cluster.freeze(frozen)
    try:
        assert kafka_cluster.states()[frozen] == "frozen"
        # The ISR drops the frozen broker and writes with acks=all go on with the other two.
        kafka_cluster.wait_isr(topic, 0, {1, 2, 3} - {frozen})
        began = time.monotonic()
        produce_all(kafka_cluster.bootstrap, topic, 20, "frozen")
        assert time.monotonic() - began < 20.0
    finally:
        kafka_cluster.thaw(frozen)
    assert kafka_cluster.states()[frozen] == "running"
    kafka_cluster.wait_isr(topic, 0, {1, 2, 3})


def test_restart_brings_back_a_killed_broker_and_refuses_unknown_ids(
    kafka_cluster: KafkaCluster,
) -> None:
    kafka_cluster.kill(3)
    kafka_cluster.restart(3)
    assert kafka_cluster.states()[3] == "running"
    wait_for("three brokers", lambda: len(kafka_cluster.admin.list_topics(timeout=10).brokers) == 3)
    unknown = run_kafka_script("kill", timeout_s=30.0, arguments=["7"])
    assert unknown.returncode == 1
    assert "no broker '7' in the cluster (brokers: 1, 2, 3)" in unknown.stderr
