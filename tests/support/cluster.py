"""The three-broker cluster of the `kafka_cluster` fixture, as a test drives it.

:class:`KafkaCluster` runs `scripts/kafka kill|freeze|thaw|restart ID` for one broker and asks
the cluster where a partition's leader, a group's coordinator and a transactional id's
coordinator live, so that a chaos test hits the broker that matters. Every wait is bounded.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import TypeVar

from confluent_kafka import ConsumerGroupTopicPartitions, ElectionType, KafkaException
from confluent_kafka import TopicPartition as Partition
from confluent_kafka.admin import AdminClient, NewTopic
from kafka_helpers import run_kafka_script, unique_name

T = TypeVar("T")

WAIT_S = 90.0
"""How long a wait for the cluster (a leader elected, an ISR shrunk) may take at most."""


def wait_for(what: str, probe: Callable[[], T | None], timeout_s: float = WAIT_S) -> T:
    """The first truthy value ``probe`` returns, asked every 0.2 s; fails after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            found = probe()
        except KafkaException:
            found = None
        if found:
            return found
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s:.0f}s waiting for {what}")
        time.sleep(0.2)


class KafkaCluster:
    """The cluster at ``bootstrap``; broker ids are 1, 2 and 3."""

    def __init__(self, bootstrap: str) -> None:
        self.bootstrap = bootstrap
        # A request to a frozen broker is given up after 10 s (librdkafka's default is 60 s)
        # so that a wait asks one of the two others before WAIT_S runs out.
        self.admin = AdminClient({"bootstrap.servers": bootstrap, "socket.timeout.ms": 10000})

    # ------------------------------------------------------------------ one broker

    def _script(self, command: str, broker: int) -> str:
        done = run_kafka_script(command, timeout_s=180.0, arguments=[str(broker)])
        if done.returncode != 0:
            raise AssertionError(f"scripts/kafka {command} {broker} failed:\n{done.stderr}")
        return done.stdout.strip()

    def kill(self, broker: int) -> None:
        """SIGKILL broker ``broker`` (kill -9)."""
        self._script("kill", broker)

    def freeze(self, broker: int) -> None:
        """SIGSTOP broker ``broker``: it holds its connections and answers nothing."""
        self._script("freeze", broker)

    def thaw(self, broker: int) -> None:
        self._script("thaw", broker)

    def restart(self, broker: int) -> None:
        """Start broker ``broker`` again (stopping it first if it runs); returns once it
        answers with the cluster listed."""
        self._script("restart", broker)

    def controller(self) -> int:
        """The id of the active controller (the KRaft quorum's leader)."""
        done = run_kafka_script("controller", timeout_s=90.0, arguments=["--brokers", "3"])
        return int(done.stdout.strip())

    def states(self) -> dict[int, str]:
        """Each broker's ``running``, ``frozen`` or ``down``."""
        done = run_kafka_script("brokers", timeout_s=30.0, arguments=["--brokers", "3"])
        document = json.loads(done.stdout)
        return {int(b["id"]): str(b["state"]) for b in document["brokers"]}

    def heal(self) -> None:
        """Every broker running again (a test that failed midway leaves none behind)."""
        for broker, state in self.states().items():
            if state == "frozen":
                self.thaw(broker)
            elif state == "down":
                self.restart(broker)
        wait_for("all brokers listed", lambda: len(self.admin.list_topics(timeout=10).brokers) == 3)

    # ------------------------------------------------------------------ topics and roles

    def create_topic(
        self,
        partitions: int = 1,
        prefix: str = "cluster",
        config: dict[str, str] | None = None,
        replicas: list[list[int]] | None = None,
    ) -> str:
        """A fresh topic replicated on all three brokers with ``min.insync.replicas=2``
        (or on the brokers ``replicas`` lists, one list per partition)."""
        name = unique_name(prefix)
        settings = {"min.insync.replicas": "2", **(config or {})}
        if replicas is None:
            topic = NewTopic(name, num_partitions=partitions, replication_factor=3, config=settings)
        else:
            topic = NewTopic(
                name, num_partitions=len(replicas), replica_assignment=replicas, config=settings
            )
        self.admin.create_topics([topic])[name].result(timeout=60)
        wait_for(f"{name} to have leaders", lambda: self._all_led(name, partitions))
        return name

    def _all_led(self, topic: str, partitions: int) -> bool:
        described = self.admin.list_topics(topic, timeout=10).topics.get(topic)
        return (
            described is not None
            and len(described.partitions) >= partitions
            and all(p.leader >= 0 for p in described.partitions.values())
        )

    def partition(self, topic: str, partition: int = 0) -> tuple[int, list[int], list[int]]:
        """The partition's leader, replicas and in-sync replicas, as the cluster says now."""
        found = self.admin.list_topics(topic, timeout=10).topics[topic].partitions[partition]
        return found.leader, list(found.replicas), list(found.isrs)

    def leader(self, topic: str, partition: int = 0) -> int:
        return self.partition(topic, partition)[0]

    def wait_leader(self, topic: str, partition: int, not_on: int) -> int:
        """The partition's leader once it is elected on a broker other than ``not_on``."""
        return wait_for(
            f"{topic}[{partition}] to get a leader other than {not_on}",
            lambda: (lambda leader: leader if leader not in (-1, not_on) else None)(
                self.leader(topic, partition)
            ),
        )

    def wait_isr(self, topic: str, partition: int, isr: set[int]) -> None:
        wait_for(
            f"{topic}[{partition}] ISR to be {sorted(isr)}",
            lambda: set(self.partition(topic, partition)[2]) == isr,
        )

    def elect_unclean(self, topic: str, partition: int) -> None:
        """Ask for an unclean election of the partition (an out-of-sync replica may lead)."""
        self.admin.elect_leaders(ElectionType.UNCLEAN, [Partition(topic, partition)]).result(
            timeout=10
        )

    def group_coordinator(self, group: str) -> int:
        """The broker that coordinates ``group`` (asks the cluster; the group may be new)."""
        described = self.admin.describe_consumer_groups([group])[group].result(timeout=30)
        return int(described.coordinator.id)

    def group_committed(self, group: str, topic: str, partitions: int) -> dict[int, int]:
        request = ConsumerGroupTopicPartitions(
            group, [Partition(topic, p) for p in range(partitions)]
        )
        listed = self.admin.list_consumer_group_offsets([request])[group].result(timeout=30)
        return {tp.partition: tp.offset for tp in listed.topic_partitions if tp.offset >= 0}
