"""Chaos: process-engine worker processes SIGKILLed at random during a Kafka run.

The consumer itself survives; its engine must replace each dead worker in the same slot
(so lanes stay pinned), send the dead worker's unanswered batches again, and report
every message exactly once. Handler calls may repeat only for messages of a killed
worker's unanswered batches.
"""

from __future__ import annotations

import random
import signal
import time
from collections import defaultdict
from pathlib import Path

import kafka_helpers
import psutil
import pytest
import recording
from chaos_harness import (
    ChildProcess,
    Progress,
    chaos_seed,
    check_run,
    spawned_children,
    wait_until,
)

from laneway.engines.process.batching import MAX_BATCH, PIPELINE

MESSAGES = 20_000
PARTITIONS = 4
KEYS = 100
KILLS = 4
WORKERS = 2
MAX_BUFFERED = 2_000


def worker_pids(consumer_pid: int, record_dir: Path) -> list[int]:
    """Live worker processes of the consumer that have handled messages already."""
    return [pid for pid in spawned_children(consumer_pid) if (record_dir / f"{pid}.log").exists()]


@pytest.mark.kafka
def test_killed_workers_are_replaced_and_nothing_is_lost(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    started = time.monotonic()
    seed = chaos_seed()
    rng = random.Random(seed)
    topic = kafka_helpers.unique_name("chaos-workers")
    group = kafka_helpers.unique_name("chaos-workers-group")
    kafka_helpers.create_topic(kafka_bootstrap, topic, PARTITIONS)
    records = [(f"key-{rng.randrange(KEYS)}".encode(), b"0.3") for _ in range(MESSAGES)]
    kafka_helpers.produce(kafka_bootstrap, topic, records)
    settings = {
        "source": "kafka",
        "bootstrap": kafka_bootstrap,
        "group": group,
        "topic": topic,
        "engine": "process",
        "ordering": "key",
        "concurrency": WORKERS,
        "max_buffered": MAX_BUFFERED,
        "commit_interval": 0.2,
        "idle_timeout": 3.0,
    }
    consumer = ChildProcess(settings, tmp_path)
    progress = Progress(tmp_path)
    killed: list[int] = []
    try:
        for _ in range(KILLS):
            target = progress.calls() + rng.randrange(MESSAGES // 40, MESSAGES // 8)

            def kill_point(target: int = target) -> bool:
                return progress.calls() >= target

            assert wait_until(kill_point, 60.0), f"seed {seed}: no progress"
            candidates = [pid for pid in worker_pids(consumer.pid, tmp_path) if pid not in killed]
            assert candidates and consumer.alive(), f"seed {seed}: no worker to kill"
            victim = rng.choice(candidates)
            psutil.Process(victim).send_signal(signal.SIGKILL)
            killed.append(victim)
        exit_code = consumer.wait(120.0)
    finally:
        if consumer.alive():
            consumer.kill()
    assert exit_code == 0
    stats = consumer.stats()

    ends = kafka_helpers.end_offsets(kafka_bootstrap, topic)
    report = check_run(tmp_path, ends, [consumer.pid], MAX_BUFFERED, order_by="worker")
    calls = recording.read_calls(tmp_path)
    by_message: dict[tuple[int, int], list[recording.Call]] = defaultdict(list)
    for call in sorted(calls, key=lambda c: c.start):
        by_message[(call.partition, call.offset)].append(call)
    rerun_after_survivor = [
        key for key, runs in by_message.items() if any(c.pid not in killed for c in runs[:-1])
    ]
    print(
        f"worker kills: seed {seed}, {KILLS} workers killed, {report.calls} handler calls for "
        f"{report.distinct} messages ({report.total_duplicates} repeated), "
        f"worker_restarts={stats['worker_restarts']}, {time.monotonic() - started:.1f}s"
    )
    assert report.problems == [], f"seed {seed}"
    assert rerun_after_survivor == [], "a message ran again although its worker survived"
    assert report.total_duplicates <= KILLS * MAX_BATCH * PIPELINE
    assert stats["processed"] == MESSAGES and stats["failed"] == 0
    assert stats["worker_restarts"] == KILLS
    committed = kafka_helpers.committed_offsets(kafka_bootstrap, group, topic)
    assert {p: o for p, (o, _) in committed.items()} == ends
