"""Chaos: a consumer process SIGKILLed at random points of a 50,000-message run, restarted
each time, on a real Kafka broker and on a durable embedded log the process owns.

A kill gives the consumer no chance to drain, commit or leave its group. What must hold
is checked by :func:`chaos_harness.check_run`: nothing lost, lane order within each
life, committed work never redone, commits durable, and committed offsets equal to the
log end once the last life stopped. Duplicates are printed per crash (``pytest -s``).
The random seed is printed too; ``LANEWAY_CHAOS_SEED=<seed>`` replays a run's kill points.

Classic protocol only: the restarted process rejoins as the same static member at once.
Under KIP-848 a static member that did not leave holds its ``group.instance.id`` until the
broker's session timeout (45 s at the least; the newcomer is refused with
``UNRELEASED_INSTANCE_ID``), so five kills would take minutes; crash recovery does not
depend on the protocol, and its rebalances are covered by ``test_chaos_group.py`` and
``test_chaos_exactly_once.py`` under both.
"""

from __future__ import annotations

import random
import time
from pathlib import Path
from typing import Any

import kafka_helpers
import pytest
from chaos_harness import ChildProcess, Progress, RunReport, chaos_seed, check_run, wait_until

import laneway

MESSAGES = 50_000
PARTITIONS = 8
KEYS = 200
KILLS = 5
WORK_MS = b"0.2"
LIFE_TIMEOUT = 60.0
"""Most seconds one life may take to reach its kill point (it needs about one)."""
FINAL_TIMEOUT = 120.0
IDLE_TIMEOUT = 3.0
MAX_BUFFERED = 2_000


def workload(seed: int) -> list[tuple[bytes, bytes]]:
    rng = random.Random(seed)
    return [(f"key-{rng.randrange(KEYS)}".encode(), WORK_MS) for _ in range(MESSAGES)]


def kill_and_restart(settings: dict[str, Any], record_dir: Path, seed: int) -> list[int]:
    """Run lives of the consumer: KILLS of them SIGKILLed after a random number of
    handler calls each, then a last one that runs until idle. Returns their pids."""
    rng = random.Random(seed)
    # At most MESSAGES / 8 calls per killed life: the run cannot finish before the last kill.
    kill_after = [rng.randrange(MESSAGES // 50, MESSAGES // 8) for _ in range(KILLS)]
    progress = Progress(record_dir)
    lives = []
    for number, calls in enumerate(kill_after, 1):
        child = ChildProcess(settings, record_dir)
        lives.append(child.pid)
        target = progress.calls() + calls

        def kill_point(child: ChildProcess = child, target: int = target) -> bool:
            return progress.calls() >= target or not child.alive()

        reached = wait_until(kill_point, LIFE_TIMEOUT)
        alive = child.alive()
        child.kill()
        assert reached and alive, (
            f"seed {seed}: life {number} ended or stalled before its kill point ({calls} calls)"
        )
    last = ChildProcess(settings, record_dir)
    lives.append(last.pid)
    assert last.wait(FINAL_TIMEOUT) == 0, f"seed {seed}: the last life failed"
    return lives


def summarize(name: str, seed: int, report: RunReport, started: float) -> None:
    per_crash = list(report.duplicates.values())[:-1]
    late = list(report.late.values())[:-1]
    print(
        f"{name}: seed {seed}, {report.distinct} messages, {report.calls} handler calls, "
        f"duplicates per crash {per_crash} (total {report.total_duplicates}; calls after "
        f"the last commit {late}), {time.monotonic() - started:.1f}s"
    )


def consumer_settings(engine: str) -> dict[str, Any]:
    return {
        "engine": engine,
        "ordering": "key",
        "concurrency": 16,
        "max_buffered": MAX_BUFFERED,
        "commit_interval": 0.2,
        "idle_timeout": IDLE_TIMEOUT,
    }


@pytest.mark.kafka
def test_sigkill_five_times_on_kafka_loses_nothing(kafka_bootstrap: str, tmp_path: Path) -> None:
    started = time.monotonic()
    seed = chaos_seed()
    topic = kafka_helpers.unique_name("chaos-crash")
    group = kafka_helpers.unique_name("chaos-crash-group")
    kafka_helpers.create_topic(kafka_bootstrap, topic, PARTITIONS)
    kafka_helpers.produce(kafka_bootstrap, topic, workload(seed))
    settings = {
        "source": "kafka",
        "bootstrap": kafka_bootstrap,
        "group": group,
        "topic": topic,
        # A static member: the restarted process takes its partitions over at once instead
        # of waiting for the killed one's session to expire.
        "kafka_config": {
            "group.instance.id": kafka_helpers.unique_name("chaos-member"),
            "session.timeout.ms": 6_000,
            "heartbeat.interval.ms": 500,
        },
        **consumer_settings("thread"),
    }
    lives = kill_and_restart(settings, tmp_path, seed)

    ends = kafka_helpers.end_offsets(kafka_bootstrap, topic)
    report = check_run(tmp_path, ends, lives, MAX_BUFFERED)
    summarize("kafka sigkill", seed, report, started)
    assert report.problems == [], f"seed {seed}"
    committed = kafka_helpers.committed_offsets(kafka_bootstrap, group, topic)
    assert {p: o for p, (o, _) in committed.items()} == ends, f"seed {seed}"


def test_sigkill_five_times_on_a_durable_embedded_log_loses_nothing(tmp_path: Path) -> None:
    started = time.monotonic()
    seed = chaos_seed()
    path = tmp_path / "log"
    record_dir = tmp_path / "calls"
    record_dir.mkdir()
    with laneway.EmbeddedLog(path=path) as log:
        log.create_topic("orders", partitions=PARTITIONS)
        log.produce_many("orders", workload(seed))
    settings = {
        "source": "embedded",
        "log_path": str(path),
        "group": "chaos",
        "topic": "orders",
        **consumer_settings("async"),
    }
    lives = kill_and_restart(settings, record_dir, seed)

    with laneway.EmbeddedLog(path=path) as log:
        ends = log.end_offsets("orders")
        committed = {p: c.offset for p, c in log.committed("chaos", "orders").items()}
    report = check_run(record_dir, ends, lives, MAX_BUFFERED)
    summarize("embedded sigkill", seed, report, started)
    assert report.problems == [], f"seed {seed}"
    assert committed == ends, f"seed {seed}"
