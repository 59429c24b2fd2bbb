"""Failover chaos on the three-broker cluster, every engine, at-least-once, results and
exactly-once, both group protocols: the leader of a consumed partition killed, the group
coordinator's broker killed, the transaction coordinator's broker killed during
exactly-once, a broker frozen past the session timeout, and a rolling restart of all
three brokers while consuming and producing results.

Each run (see ``support/failover.py``): nothing lost, key order kept in each consumer life,
duplicates only where a life or a rebalance left work uncommitted (counted), results
exactly once under exactly-once, every partition committed to its end, and the time to
recover measured (printed with ``-s``; docs/concepts/rebalances.md has the figures)."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import recording
from cluster import KafkaCluster
from failover import check, failover_run, transaction_coordinator, wait_settled

pytestmark = pytest.mark.cluster

DOWN_S = 10.0
"""How long a killed broker stays down before it is restarted."""
FROZEN_S = 15.0
"""How long a frozen broker stays frozen: past the 6 s group session and the 9 s after
which the controller fences a broker."""


@pytest.fixture
def cluster(kafka_cluster: KafkaCluster) -> Iterator[KafkaCluster]:
    wait_settled(kafka_cluster)
    try:
        yield kafka_cluster
    finally:
        wait_settled(kafka_cluster)


def killed(
    cluster: KafkaCluster, which: Callable[[str, str], tuple[int, str]]
) -> Callable[[str, str], str]:
    """A fault: kill -9 the broker ``which(topic, group)`` names, restart it DOWN_S later."""

    def fault(topic: str, group: str) -> str:
        broker, role = which(topic, group)
        cluster.kill(broker)
        time.sleep(DOWN_S)
        cluster.restart(broker)
        return f"killed broker {broker}, {role}"

    return fault


def leader_killed(cluster: KafkaCluster) -> Callable[[str, str], str]:
    return killed(cluster, lambda topic, _: (cluster.leader(topic, 0), f"the leader of {topic}[0]"))


def coordinator_killed(cluster: KafkaCluster) -> Callable[[str, str], str]:
    return killed(
        cluster, lambda _, group: (cluster.group_coordinator(group), "the group coordinator")
    )


def transaction_coordinator_killed(cluster: KafkaCluster) -> Callable[[str, str], str]:
    return killed(
        cluster,
        lambda _, group: (
            transaction_coordinator(cluster, f"{group}-member"),
            "the transaction coordinator",
        ),
    )


def coordinator_frozen(cluster: KafkaCluster) -> Callable[[str, str], str]:
    def fault(topic: str, group: str) -> str:
        coordinator = cluster.group_coordinator(group)
        cluster.freeze(coordinator)
        time.sleep(FROZEN_S)
        cluster.thaw(coordinator)
        return f"froze broker {coordinator}, the group coordinator, for {FROZEN_S:g} s"

    return fault


def rolling_restart(cluster: KafkaCluster) -> Callable[[str, str], str]:
    def fault(topic: str, group: str) -> str:
        for broker in (1, 2, 3):
            cluster.restart(broker)
            cluster.wait_isr(topic, 0, {1, 2, 3})
        return "restarted brokers 1, 2 and 3, one after the other"

    return fault


SCENARIOS = [
    pytest.param(leader_killed, "thread", "at-least-once", "consumer", id="leader-killed"),
    pytest.param(coordinator_killed, "async", "results", "classic", id="coordinator-killed"),
    pytest.param(
        transaction_coordinator_killed,
        "process",
        "exactly-once",
        "consumer",
        id="transaction-coordinator-killed",
    ),
    pytest.param(coordinator_frozen, "sync", "at-least-once", "classic", id="broker-frozen"),
    pytest.param(rolling_restart, "process", "results", "consumer", id="rolling-restart"),
]


@pytest.mark.parametrize(("scenario", "engine", "mode", "protocol"), SCENARIOS)
def test_failover(
    scenario: Callable[[KafkaCluster], Callable[[str, str], str]],
    engine: str,
    mode: str,
    protocol: str,
    cluster: KafkaCluster,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(recording.RECORD_DIR, str(tmp_path))
    run = failover_run(cluster, tmp_path, engine, mode, protocol, scenario(cluster))
    figures = check(run, cluster.bootstrap)
    print(
        f"\nfailover {run.fault} | {engine}, {mode}, {protocol}: {figures.handled} records, "
        f"{figures.duplicates} duplicates, {figures.lives} lives "
        f"({', '.join(how for _, _, how in run.lives)}), {figures.rebalances} rebalances, "
        f"longest a partition went without a record: {figures.recovery:.1f} s"
    )
    assert figures.recovery < 90.0, f"a partition was stuck for {figures.recovery:.0f} s"
