"""Exactly-once results (``exactly_once=True``): results and offsets in one transaction.

On the embedded log and on a real broker: every input's result is visible exactly once to a
reader of committed data, together with the input's committed offset (and its
finished-beyond-commit metadata); a zombie's transaction (a member fenced by a newer one with
the same ``transactional.id``, or committing partitions it no longer owns) is aborted and
none of its records become visible. The crash and rebalance proof is
``test_chaos_exactly_once.py``.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Sequence
from typing import Any

import kafka_helpers
import process_handlers
import pytest
from chaos_harness import run_bounded, spawned_children
from cluster import wait_for
from confluent_kafka import Consumer, Producer
from topics import AssignmentListener, EmbeddedTopic, KafkaTopic, LogTopic

import laneway
from laneway.results import Produce
from laneway.sources.capabilities import PARTITIONED_LOG
from laneway.sources.kafka.transactions import KafkaTransaction, transactional_id
from laneway.types import CommitPosition, PartitionId

GROUP = "exactly-once"


def echo_batch(batch: list[laneway.Message]) -> list[laneway.Produce]:
    return [process_handlers.echo_result(message) for message in batch]


def run(
    topic: LogTopic, count: int, handler: Any = process_handlers.echo_result, **options: Any
) -> laneway.ConsumerStats:
    consumer = laneway.Consumer(
        topic.source(GROUP),
        handler,
        engine="thread",
        exactly_once=True,
        commit_interval=0.1,
        handle_signals=False,
        **options,
    )
    return run_bounded(consumer, count, limit=60.0)


def inputs(count: int) -> list[tuple[bytes, bytes]]:
    return [(f"k{i % 30}".encode(), str(i).encode()) for i in range(count)]


def read_committed(bootstrap: str, topic: str, expected: int) -> list[bytes | None]:
    """Every committed record of ``topic`` (read_committed), waiting for ``expected``."""
    reader = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": kafka_helpers.unique_name("reader"),
            "auto.offset.reset": "earliest",
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
        }
    )
    reader.subscribe([topic])
    values: list[bytes | None] = []
    try:
        for _ in range(60):
            values += [m.value() for m in reader.consume(1000, 0.25) if m.error() is None]
            if len(values) >= expected:
                values += [m.value() for m in reader.consume(1000, 1.0) if m.error() is None]
                break
    finally:
        reader.close()
    return values


def test_embedded_results_and_offsets_commit_together() -> None:
    topic = EmbeddedTopic(partitions=4)
    topic.create("orders.out", 4)
    topic.produce(inputs(3_000))
    stats = run(topic, 3_000, echo_batch, batch_size=50)
    assert stats.processed == 3_000
    values = sorted(int(v or b"") for _, v, _ in topic.read("orders.out", 3_000))
    assert values == list(range(3_000))
    assert topic.committed(GROUP) == {p: (end, "") for p, end in topic.end_offsets().items()}


def test_an_embedded_zombie_commits_nothing() -> None:
    """A member evicted from its group (its partitions went to another) commits neither
    offsets nor results: the whole transaction is refused."""
    log = laneway.EmbeddedLog()
    log.create_topic("in", 1)
    log.create_topic("out", 1)
    zombie = log.subscribe(["in"], "g", session_timeout=0.05)
    zombie.open(AssignmentListener())
    zombie.poll(1, 0.0)
    transaction = zombie.transaction()
    transaction.produce(Produce("out", b"late"))
    heir = log.subscribe(["in"], "g")
    heir.open(AssignmentListener())
    time.sleep(0.1)
    heir.poll(1, 0.0)  # evicts the silent zombie, takes its partition
    with pytest.raises(laneway.TransactionError, match="not owned"):
        transaction.commit({("in", 0): CommitPosition(1)})
    assert log.end_offsets("out") == {0: 0}
    assert log.committed("g", "in") == {}


def test_exactly_once_needs_a_source_that_can_do_it() -> None:
    class Plain:
        def open(self, listener: object) -> None: ...
        def poll(self, max_messages: int, timeout: float) -> list[laneway.Message]: ...
        def progress(self, config: object) -> object: ...

        capabilities = PARTITIONED_LOG

        def pause(self, partitions: object) -> None: ...
        def resume(self, partitions: object) -> None: ...
        def unread(self, partitions: object) -> dict[object, int]: ...
        def log_ends(self, partitions: object) -> dict[object, int]: ...
        def close(self) -> None: ...
        def producer(self) -> object: ...

        group = name = "plain"

    with pytest.raises(laneway.ConfigError, match="exactly_once=True is not valid with source"):
        laneway.Consumer(Plain(), process_handlers.echo_result, exactly_once=True)  # type: ignore[arg-type]
    bounded = laneway.EmbeddedLog(capacity=100)
    bounded.create_topic("in", 1)
    consumer = laneway.Consumer(
        bounded.subscribe(["in"], "g"), process_handlers.echo_result, exactly_once=True
    )
    with pytest.raises(laneway.ConfigError, match="needs an EmbeddedLog without capacity"):
        consumer.run(idle_timeout=0.1)


@pytest.mark.kafka
def test_kafka_results_are_read_committed_exactly_once(kafka_bootstrap: str) -> None:
    topic = KafkaTopic(kafka_bootstrap, partitions=4)
    topic.create(f"{topic.name}.out", 4)
    topic.produce(inputs(3_000))
    stats = run(topic, 3_000)
    assert stats.processed == 3_000 and stats.commits >= 1
    values = read_committed(kafka_bootstrap, f"{topic.name}.out", 3_000)
    assert sorted(int(v or b"") for v in values) == list(range(3_000))
    assert topic.committed(GROUP) == {p: (end, "") for p, end in topic.end_offsets().items()}


class Owner(AssignmentListener):
    def on_revoked(self, partitions: Sequence[PartitionId]) -> None:
        pass


def joined(bootstrap: str, topic: str, group: str, instance: str) -> tuple[Any, Owner]:
    source = laneway.KafkaSource(
        bootstrap, group=group, topics=[topic], config={"group.instance.id": instance}
    )
    listener = Owner()
    source.open(listener)
    for _ in range(100):
        source.poll(10, 0.1)
        if listener.assigned:
            break
    assert listener.assigned, "never assigned"
    return source, listener


@pytest.mark.kafka
def test_kafka_offsets_with_metadata_commit_in_the_transaction(kafka_bootstrap: str) -> None:
    topic = kafka_helpers.unique_name("eos-meta")
    group = kafka_helpers.unique_name("eos-meta-group")
    kafka_helpers.create_topic(kafka_bootstrap, topic, 1)
    kafka_helpers.create_topic(kafka_bootstrap, topic + ".out", 1)
    source, _ = joined(kafka_bootstrap, topic, group, "member-1")
    try:
        transaction = source.transaction()
        assert transaction.transactional_id == f"laneway-{group}-member-1"
        transaction.produce(Produce(topic + ".out", b"result"))
        transaction.commit({(topic, 0): CommitPosition(3, "laneway-test-metadata")})
    finally:
        transaction.close()
        source.close()
    assert kafka_helpers.committed_offsets(kafka_bootstrap, group, topic) == {
        0: (3, "laneway-test-metadata")
    }
    assert read_committed(kafka_bootstrap, topic + ".out", 1) == [b"result"]


@pytest.mark.kafka
def test_a_fenced_kafka_zombie_aborts_and_shows_nothing(kafka_bootstrap: str) -> None:
    """A newer member with the same transactional.id fences the zombie: the zombie's
    transaction cannot commit, and none of its records is ever read committed."""
    topic = kafka_helpers.unique_name("eos-zombie")
    group = kafka_helpers.unique_name("eos-zombie-group")
    kafka_helpers.create_topic(kafka_bootstrap, topic, 1)
    kafka_helpers.create_topic(kafka_bootstrap, topic + ".out", 1)
    source, _ = joined(kafka_bootstrap, topic, group, "member-1")
    connection = {"bootstrap.servers": kafka_bootstrap}
    tid = transactional_id(group, "member-1")
    consumer = source._consumer
    zombie = KafkaTransaction(connection, consumer, tid, "zombie")
    heir = KafkaTransaction(connection, consumer, tid, "heir")
    try:
        zombie.produce(Produce(topic + ".out", b"zombie"))
        zombie.poll()
        heir.produce(Produce(topic + ".out", b"heir"))  # init_transactions fences
        with pytest.raises(laneway.TransactionError):
            zombie.commit({(topic, 0): CommitPosition(1)})
        heir.commit({(topic, 0): CommitPosition(2)})
    finally:
        zombie.close()
        heir.close()
        source.close()
    assert read_committed(kafka_bootstrap, topic + ".out", 1) == [b"heir"]
    assert kafka_helpers.committed_offsets(kafka_bootstrap, group, topic) == {0: (2, "")}


def members(bootstrap: str, group: str) -> int:
    admin = kafka_helpers.admin_client(bootstrap)  # kept: its futures die with it
    return len(admin.describe_consumer_groups([group])[group].result(timeout=30).members)


@pytest.mark.kafka
def test_a_fenced_member_leaves_its_group_and_stops_its_workers(kafka_bootstrap: str) -> None:
    """A newer producer with the member's ``transactional.id`` fences it mid-run (process
    engine, KIP-848 group): the run ends with TransactionError, not the client's exception,
    and it lets go of everything. Seen on the three-broker cluster: a fenced life that
    left its consumer open kept its partitions for ``max.poll.interval.ms`` (5 minutes)
    and its workers alive."""
    topic = KafkaTopic(kafka_bootstrap, partitions=4)
    topic.create(f"{topic.name}.out", 4)
    topic.produce(inputs(20_000))
    group = kafka_helpers.unique_name("eos-fenced")
    tid = f"{group}-member"
    before = spawned_children(os.getpid())
    consumer = laneway.Consumer(
        laneway.KafkaSource(
            kafka_bootstrap, group, [topic.name], {"group.protocol": "consumer"},
            transactional_id=tid,
        ),
        process_handlers.slow_echo_result,
        engine="process",
        concurrency=4,
        exactly_once=True,
        commit_interval=0.1,
        drain_timeout=5.0,
        handle_signals=False,
    )  # fmt: skip
    ended: list[BaseException | laneway.ConsumerStats] = []

    def run() -> None:
        try:
            ended.append(consumer.run(idle_timeout=30.0))
        except BaseException as error:
            ended.append(error)

    runner = threading.Thread(target=run, daemon=True)
    runner.start()
    wait_for("results committed", lambda: consumer.stats().processed >= 500, 60.0)
    heir = Producer({"bootstrap.servers": kafka_bootstrap, "transactional.id": tid})
    heir.init_transactions(30.0)  # fences the member's producer
    runner.join(60.0)
    assert not runner.is_alive(), f"the fenced member ran on: {consumer.stats()}"
    [outcome] = ended
    assert isinstance(outcome, laneway.TransactionError), repr(outcome)
    assert consumer.stats().processed < 20_000, "fenced too late to prove anything"
    wait_for("the group empty", lambda: members(kafka_bootstrap, group) == 0, 10.0)
    wait_for("the workers gone", lambda: not spawned_children(os.getpid()) - before, 10.0)
