"""Chaos: three consumer processes in one Kafka group while members leave (SIGTERM) and
join again every few seconds and messages keep arriving.

Every leave is graceful (drain, commit, leave the group) and every rebalance is
cooperative, so on top of the rules of :func:`chaos_harness.check_run` (nothing lost,
lane order per life, committed work never redone, commits durable) no message may be
handled twice, and the group's committed offsets must reach the log end. It runs under
both rebalance protocols: the classic one (cooperative-sticky) and KIP-848's
(``group.protocol=consumer``), where a commit can race a new member epoch.
"""

from __future__ import annotations

import random
import threading
import time
from pathlib import Path
from typing import Any

import kafka_helpers
import pytest
from chaos_harness import PROTOCOLS, ChildProcess, chaos_seed, check_run, group_config, wait_until

MEMBERS = 3
PARTITIONS = 8
KEYS = 100
MESSAGES = 20_000
PRODUCE_SECONDS = 12.0
CHUNKS = 25
CHURN_EVERY = (2.0, 3.5)
"""Seconds between two membership changes (uniform)."""
MAX_BUFFERED = 1_000
SETTLE_TIMEOUT = 90.0


def produce_paced(bootstrap: str, topic: str, seed: int, done: list[int]) -> None:
    """Produce MESSAGES over about PRODUCE_SECONDS, in CHUNKS, so churn meets traffic."""
    rng = random.Random(seed)
    per_chunk = MESSAGES // CHUNKS
    for _ in range(CHUNKS):
        records = [(f"key-{rng.randrange(KEYS)}".encode(), b"0.5") for _ in range(per_chunk)]
        kafka_helpers.produce(bootstrap, topic, records)
        done.append(len(records))
        time.sleep(PRODUCE_SECONDS / CHUNKS)


@pytest.mark.kafka
@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_members_leaving_and_joining_lose_and_repeat_nothing(
    protocol: str, kafka_bootstrap: str, tmp_path: Path
) -> None:
    started = time.monotonic()
    seed = chaos_seed()
    rng = random.Random(seed)
    topic = kafka_helpers.unique_name("chaos-group")
    group = kafka_helpers.unique_name("chaos-group-group")
    kafka_helpers.create_topic(kafka_bootstrap, topic, PARTITIONS)
    settings: dict[str, Any] = {
        "source": "kafka",
        "bootstrap": kafka_bootstrap,
        "group": group,
        "topic": topic,
        "kafka_config": group_config(protocol),
        "engine": "thread",
        "ordering": "key",
        "concurrency": 8,
        "max_buffered": MAX_BUFFERED,
        "commit_interval": 0.5,
    }
    members = [ChildProcess(settings, tmp_path) for _ in range(MEMBERS)]
    lives = [m.pid for m in members]
    produced: list[int] = []
    producer = threading.Thread(
        target=produce_paced, args=(kafka_bootstrap, topic, seed, produced), daemon=True
    )
    producer.start()
    changes = 0
    exits: list[int] = []
    try:
        while producer.is_alive() and changes < 20:
            time.sleep(rng.uniform(*CHURN_EVERY))
            index = rng.randrange(len(members))
            leaving = members[index]
            assert wait_until(leaving.started, 30.0), f"seed {seed}: a member never started"
            exits.append(leaving.terminate())
            time.sleep(rng.uniform(0.0, 1.0))  # the group runs one member short for a while
            members[index] = ChildProcess(settings, tmp_path)
            lives.append(members[index].pid)
            changes += 1
        producer.join(60.0)
        assert sum(produced) == MESSAGES, "the producer did not finish"
        settled = wait_until(
            lambda: kafka_helpers.committed_to_end(kafka_bootstrap, group, topic, MESSAGES),
            SETTLE_TIMEOUT,
            interval=0.5,
        )
    finally:
        for member in members:
            wait_until(member.started, 30.0)  # a SIGTERM before that is no graceful stop
            if member.alive():
                exits.append(member.terminate())
    assert settled, f"seed {seed}: committed offsets never reached the log end"
    assert exits == [0] * len(exits), f"seed {seed}: a member exited uncleanly: {exits}"
    assert changes >= 4, f"seed {seed}: only {changes} membership changes happened"

    ends = kafka_helpers.end_offsets(kafka_bootstrap, topic)
    report = check_run(tmp_path, ends, lives, MAX_BUFFERED)
    print(
        f"group churn ({protocol}): seed {seed}, {changes} leave/join cycles, {len(lives)} lives, "
        f"{report.distinct} messages, {report.total_duplicates} duplicates, "
        f"{time.monotonic() - started:.1f}s"
    )
    assert report.problems == [], f"seed {seed}"
    assert report.total_duplicates == 0, f"seed {seed}: graceful leaves repeated work"
    committed = kafka_helpers.committed_offsets(kafka_bootstrap, group, topic)
    assert {p: o for p, (o, _) in committed.items()} == ends
