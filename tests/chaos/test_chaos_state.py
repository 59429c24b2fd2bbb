"""Stateful handlers under faults on a real broker: no key's count is ever off.

A counting handler (each key's state: how many of its messages it applied) runs on the
thread engine at concurrency 64 over Zipf-distributed keys (a few hot keys, a long tail)
produced while it runs. The member is SIGKILLed three times mid-run and restarted at once
with the same state directory; in another run a second member joins mid-run and leaves
again (two rebalances moving partitions and their state). Afterwards every key's latest
state in the changelog must equal the number of its messages exactly: at-least-once by the
offsets each key's state records (a replayed message already applied is not applied again),
exactly-once by the transaction. Last, the changelog is compacted (tiny segments, an eager
cleaner) and a member with an *empty* state directory restores from it and goes on
counting exactly. ``LANEWAY_CHAOS_SEED`` replays a run's schedule.
"""

from __future__ import annotations

import json
import random
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from functools import partial
from pathlib import Path
from typing import Any

import kafka_helpers
import pytest
from changelogs import latest_counts, read_kafka
from chaos_harness import chaos_seed, wait_until
from checkout import SUPPORT
from state_child import TRANSACTION_FAILED

pytestmark = pytest.mark.kafka

MESSAGES = 30_000
PARTITIONS = 8
KEYS = 500
ZIPF = 1.1
PRODUCE_SECONDS = 45.0
CHUNKS = 90
KILLS = 3
SETTLE_TIMEOUT = 180.0
CHILD = SUPPORT / "state_child.py"


class Member:
    """One member slot: its process, restarted after a kill or a failed transaction."""

    def __init__(self, slot: int, settings: dict[str, Any]) -> None:
        self.settings = {**settings, "transactional_id": f"{settings['group']}-slot-{slot}"}
        self.process = self._start()

    def _start(self) -> subprocess.Popen[bytes]:
        return subprocess.Popen([sys.executable, str(CHILD), json.dumps(self.settings)])

    def keep_alive(self) -> None:
        code = self.process.poll()
        if code is not None:
            assert code == TRANSACTION_FAILED, f"a member exited with {code}"
            self.process = self._start()

    def kill(self) -> None:
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(30)
        self.process = self._start()

    def stop(self) -> None:
        self.process.send_signal(signal.SIGTERM)
        try:
            code = self.process.wait(90)
        except subprocess.TimeoutExpired:
            self.process.send_signal(signal.SIGUSR1)
            time.sleep(1.0)
            self.process.kill()
            raise
        assert code in (0, TRANSACTION_FAILED), f"a member exited with {code} on SIGTERM"


def zipf_keys(rng: random.Random, count: int) -> list[int]:
    weights = [1.0 / (rank + 1) ** ZIPF for rank in range(KEYS)]
    return rng.choices(range(KEYS), weights=weights, k=count)


def produce_paced(bootstrap: str, topic: str, keys: list[int], done: list[int]) -> None:
    per_chunk = len(keys) // CHUNKS
    for chunk in range(CHUNKS):
        part = keys[chunk * per_chunk : (chunk + 1) * per_chunk]
        kafka_helpers.produce(bootstrap, topic, [(f"key-{k}".encode(), b"1") for k in part])
        done.append(len(part))
        time.sleep(PRODUCE_SECONDS / CHUNKS)


def settings_for(bootstrap: str, tmp_path: Path, exactly_once: bool, name: str) -> dict[str, Any]:
    topic = kafka_helpers.unique_name(name)
    kafka_helpers.create_topic(bootstrap, topic, PARTITIONS)
    return {
        "bootstrap": bootstrap,
        "topic": topic,
        "group": kafka_helpers.unique_name("state-chaos"),
        "changelog": f"{topic}.counts",
        "state_dir": str(tmp_path / "state"),
        "exactly_once": exactly_once,
    }


def produce_in_background(
    bootstrap: str, topic: str, seed: int
) -> tuple[Counter[bytes], threading.Thread, list[int]]:
    keys = zipf_keys(random.Random(seed), MESSAGES)
    done: list[int] = []
    producer = threading.Thread(target=produce_paced, args=(bootstrap, topic, keys, done))
    producer.start()
    per_chunk = MESSAGES // CHUNKS
    expected = Counter(f"key-{k}".encode() for k in keys[: per_chunk * CHUNKS])
    return expected, producer, done


def committed_sum(bootstrap: str, settings: dict[str, Any]) -> int:
    """The sum of the group's committed offsets (-1 while the broker's coordinator loads)."""
    from confluent_kafka import KafkaException

    try:
        committed = kafka_helpers.committed_offsets(bootstrap, settings["group"], settings["topic"])
    except KafkaException as error:
        if not error.args[0].retriable():
            raise
        return -1
    return sum(offset for offset, _ in committed.values())


def committed_past(bootstrap: str, settings: dict[str, Any], since: int) -> bool:
    return committed_sum(bootstrap, settings) > since


def settle(bootstrap: str, settings: dict[str, Any], members: list[Member]) -> None:
    """Wait until the group committed every input, keeping the members alive."""
    total = MESSAGES // CHUNKS * CHUNKS

    def committed() -> bool:
        for member in members:
            member.keep_alive()
        return kafka_helpers.committed_to_end(
            bootstrap, settings["group"], settings["topic"], total
        )

    assert wait_until(committed, SETTLE_TIMEOUT, interval=0.5), (
        "the group did not commit everything"
    )


@pytest.mark.parametrize("exactly_once", [False, True], ids=["at-least-once", "exactly-once"])
def test_counts_are_exact_after_three_kills(
    kafka_bootstrap: str, tmp_path: Path, exactly_once: bool
) -> None:
    seed = chaos_seed()
    rng = random.Random(seed)
    settings = settings_for(kafka_bootstrap, tmp_path, exactly_once, "state-kills")
    member = Member(0, settings)
    expected, producer, _ = produce_in_background(kafka_bootstrap, settings["topic"], seed)
    try:
        for _ in range(KILLS):
            # Mid-run: only once this life committed something, so that it holds applied
            # but uncommitted work when it dies (a member still joining would lose nothing).
            since = max(committed_sum(kafka_bootstrap, settings), 0)
            assert wait_until(
                partial(committed_past, kafka_bootstrap, settings, since),
                90.0,
                interval=0.2,
            ), "the member committed nothing"
            time.sleep(rng.uniform(0.3, 1.5))
            member.keep_alive()
            member.kill()
        producer.join(120)
        settle(kafka_bootstrap, settings, [member])
    finally:
        member.stop()
    counts = latest_counts(read_kafka(kafka_bootstrap, settings["changelog"]))
    off = {k: (counts.get(k), n) for k, n in expected.items() if counts.get(k) != n}
    print(f"seed {seed}: {len(expected)} keys, {sum(expected.values())} messages, off: {off}")
    assert not off, f"counts off after {KILLS} kills (seed {seed}): {dict(list(off.items())[:10])}"


def test_counts_are_exact_across_rebalances(kafka_bootstrap: str, tmp_path: Path) -> None:
    seed = chaos_seed()
    settings = settings_for(kafka_bootstrap, tmp_path, False, "state-rebalance")
    first = Member(0, settings)
    second_settings = {**settings, "state_dir": str(tmp_path / "state-second")}
    expected, producer, _ = produce_in_background(kafka_bootstrap, settings["topic"], seed)
    members = [first]
    try:
        time.sleep(4.0)
        second = Member(1, second_settings)  # joins: half of the partitions move to it
        members.append(second)
        time.sleep(5.0)
        second.stop()  # leaves: they move back, their state restored from the changelog
        members.remove(second)
        producer.join(120)
        settle(kafka_bootstrap, settings, members)
    finally:
        for member in members:
            member.stop()
    counts = latest_counts(read_kafka(kafka_bootstrap, settings["changelog"]))
    off = {k: (counts.get(k), n) for k, n in expected.items() if counts.get(k) != n}
    assert not off, f"counts off after two rebalances (seed {seed}): {dict(list(off.items())[:10])}"


def test_a_compacted_changelog_restores_into_an_empty_directory(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    """Tiny segments and an eager cleaner compact the changelog while a member counts; a
    member with an empty state directory then restores from what compaction left and goes
    on counting exactly."""
    from confluent_kafka.admin import NewTopic

    settings = settings_for(kafka_bootstrap, tmp_path, False, "state-compacted")
    admin = kafka_helpers.admin_client(kafka_bootstrap)
    compacting = {
        "cleanup.policy": "compact",
        "segment.ms": "200",
        "min.cleanable.dirty.ratio": "0.01",
        "min.compaction.lag.ms": "0",
        "delete.retention.ms": "100",
    }
    new = NewTopic(settings["changelog"], num_partitions=PARTITIONS, config=compacting)
    admin.create_topics([new])[settings["changelog"]].result(30)
    rng = random.Random(chaos_seed())
    keys = zipf_keys(rng, 6_000)
    member = Member(0, settings)
    try:
        for chunk in range(12):  # writes spread out: segments roll and get cleaned
            part = keys[chunk * 500 : (chunk + 1) * 500]
            kafka_helpers.produce(
                kafka_bootstrap, settings["topic"], [(f"key-{k}".encode(), b"1") for k in part]
            )
            time.sleep(0.5)

        def compacted() -> bool:
            records = len(read_kafka(kafka_bootstrap, settings["changelog"], limit_s=30.0))
            ends = sum(kafka_helpers.end_offsets(kafka_bootstrap, settings["changelog"]).values())
            return records < ends // 2

        def commit_all() -> bool:
            member.keep_alive()
            return kafka_helpers.committed_to_end(
                kafka_bootstrap, settings["group"], settings["topic"], len(keys)
            )

        assert wait_until(commit_all, SETTLE_TIMEOUT, interval=0.5)
        # Keep writing now and then (a segment rolls only when written to) until cleaned.
        for _ in range(60):
            if compacted():
                break
            kafka_helpers.produce(kafka_bootstrap, settings["topic"], [(b"key-0", b"1")])
            keys.append(0)
            time.sleep(2.0)
        assert compacted(), "the broker did not compact the changelog in time"
        assert wait_until(commit_all, SETTLE_TIMEOUT, interval=0.5)
    finally:
        member.stop()
    fresh = Member(1, {**settings, "state_dir": str(tmp_path / "empty")})
    more = zipf_keys(rng, 2_000)
    kafka_helpers.produce(
        kafka_bootstrap, settings["topic"], [(f"key-{k}".encode(), b"1") for k in more]
    )
    keys += more
    try:
        assert wait_until(
            lambda: kafka_helpers.committed_to_end(
                kafka_bootstrap, settings["group"], settings["topic"], len(keys)
            ),
            SETTLE_TIMEOUT,
            interval=0.5,
        )
    finally:
        fresh.stop()
    expected = Counter(f"key-{k}".encode() for k in keys)
    counts = latest_counts(read_kafka(kafka_bootstrap, settings["changelog"]))
    off = {k: (counts.get(k), n) for k, n in expected.items() if counts.get(k) != n}
    assert not off, f"counts off after a restore from a compacted changelog: {off}"
