"""The exactly-once proof: consume -> transform -> produce on a real broker under faults.

Three members in one group turn 50,000 inputs (200 keys, produced while they run) into one
result each, keyed like the input. Meanwhile a member is SIGKILLed five times at random
(its slot restarted at once: the same ``transactional_id``, so the new process fences the
dead one and aborts the transaction it left open) and, between kills, a member leaves
gracefully and joins again (a rebalance storm: every change moves partitions).

With ``exactly_once=True`` a ``read_committed`` reader of the output must see every input's
result exactly once, in input order per key. Without it, every result at least once: each
duplicate must be *explained*, i.e. be part of a replay: a key's results are its inputs in
order, restarting from an earlier input at most once per SIGKILL (the killed member's
uncommitted work, run again by the next owner from the last commit). The counts are printed
(``pytest -s``); ``LANEWAY_CHAOS_SEED`` replays a run's schedule.

The exactly-once run also goes under KIP-848 (``group.protocol=consumer``), where offsets
are committed in the transaction with the member epoch and a killed member holds its
partitions for the broker's session timeout (45 s at the least), which the run waits out
(about 70 s instead of 45). The at-least-once run stays on the classic protocol: its
rebalances are the same, and plain commits under KIP-848 are ``test_chaos_group.py``'s.
"""

from __future__ import annotations

import json
import random
import select
import signal
import subprocess
import sys
import threading
import time
from collections import defaultdict
from typing import Any

import kafka_helpers
import pytest
from chaos_harness import chaos_seed, group_config, wait_until
from checkout import SUPPORT
from results_child import TRANSACTION_FAILED

MESSAGES = 50_000
PARTITIONS = 8
KEYS = 200
MEMBERS = 3
KILLS = 5
PRODUCE_SECONDS = 20.0
CHUNKS = 40
CHANGE_EVERY = (1.0, 2.5)
"""Seconds between two membership changes (uniform)."""
SETTLE_TIMEOUT = 120.0
CHILD = SUPPORT / "results_child.py"


class Member:
    """One slot of the group: the current process filling it, restarted as needed."""

    def __init__(self, slot: int, settings: dict[str, Any]) -> None:
        self.settings = {**settings, "transactional_id": f"{settings['group']}-slot-{slot}"}
        self.failed_transactions = 0
        self.process = self._start()

    def _start(self) -> subprocess.Popen[str]:
        return subprocess.Popen(
            [sys.executable, str(CHILD), json.dumps(self.settings)],
            stdout=subprocess.PIPE,
            text=True,
        )

    def _started(self) -> None:
        """Wait (up to 60 s) until the member says its SIGTERM handler is in place: a
        SIGTERM before that would kill it, not stop it (a member restarted just before)."""
        assert self.process.stdout is not None
        ready, _, _ = select.select([self.process.stdout], [], [], 60.0)
        assert ready, "a member did not start within 60 s"
        self.process.stdout.readline()

    def keep_alive(self) -> None:
        """Start the slot again if its process ended by itself (a failed transaction)."""
        code = self.process.poll()
        if code is not None:
            assert code == TRANSACTION_FAILED, f"a member exited with {code}"
            self.failed_transactions += 1
            self.process = self._start()

    def kill(self) -> None:
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(30)
        self.process = self._start()

    def stop(self, restart: bool) -> None:
        self._started()
        self.process.send_signal(signal.SIGTERM)
        try:
            code = self.process.wait(60)
        except subprocess.TimeoutExpired:
            self.process.send_signal(signal.SIGUSR1)
            time.sleep(1.0)
            self.process.kill()
            raise
        assert code in (0, TRANSACTION_FAILED), f"a member exited with {code} on SIGTERM"
        self.failed_transactions += code == TRANSACTION_FAILED
        if restart:
            self.process = self._start()


def produce_paced(bootstrap: str, topic: str, seed: int, done: list[int]) -> None:
    """MESSAGES inputs ``<key>:<n-th of this key>`` over PRODUCE_SECONDS, in CHUNKS."""
    rng = random.Random(seed)
    counts = [0] * KEYS
    per_chunk = MESSAGES // CHUNKS
    for _ in range(CHUNKS):
        records = []
        for _ in range(per_chunk):
            key = rng.randrange(KEYS)
            records.append((f"key-{key}".encode(), f"{key}:{counts[key]}".encode()))
            counts[key] += 1
        kafka_helpers.produce(bootstrap, topic, records)
        done.append(len(records))
        time.sleep(PRODUCE_SECONDS / CHUNKS)


def read_results(bootstrap: str, topic: str) -> dict[int, list[int]]:
    """Every committed result, as each key's input numbers in the order they were written."""
    from confluent_kafka import Consumer

    reader = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": kafka_helpers.unique_name("results-reader"),
            "auto.offset.reset": "earliest",
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
        }
    )
    reader.subscribe([topic])
    by_key: dict[int, list[int]] = defaultdict(list)
    quiet = 0
    try:
        while quiet < 8:  # two seconds without a record: all read
            batch = reader.consume(5_000, 0.25)
            quiet = 0 if batch else quiet + 1
            for record in batch:
                if record.error() is None:
                    key, number = (record.value() or b"").decode().split(":")
                    by_key[int(key)].append(int(number))
    finally:
        reader.close()
    return by_key


def replays(numbers: list[int]) -> int:
    """How often a key's results restart from an earlier input; -1 when they are not a
    replay of inputs in order (a result skipped, or out of order within a run)."""
    restarts = 0
    seen = -1
    for before, after in zip([-1, *numbers], numbers, strict=False):
        if after == before + 1:
            seen = max(seen, after)
            continue
        if after <= before and after <= seen + 1:
            restarts += 1
            continue
        return -1
    return restarts


def run_storm(
    bootstrap: str, exactly_once: bool, seed: int, protocol: str = "classic"
) -> tuple[dict[int, list[int]], int]:
    """The scenario of the module docs, with members of ``protocol``'s groups; returns the
    results read and failed transactions."""
    rng = random.Random(seed)
    name = "eos" if exactly_once else "alo"
    topic = kafka_helpers.unique_name(f"chaos-{name}")
    group = kafka_helpers.unique_name(f"chaos-{name}-group")
    kafka_helpers.create_topic(bootstrap, topic, PARTITIONS)
    kafka_helpers.create_topic(bootstrap, topic + ".out", PARTITIONS)
    settings = {
        "bootstrap": bootstrap,
        "group": group,
        "topic": topic,
        "out": topic + ".out",
        "exactly_once": exactly_once,
        "commit_interval": 0.1,
        "max_buffered": 1_000,
        "kafka_config": group_config(protocol),
    }
    produced: list[int] = []
    producer = threading.Thread(
        target=produce_paced, args=(bootstrap, topic, seed, produced), daemon=True
    )
    members = [Member(slot, settings) for slot in range(MEMBERS)]
    producer.start()
    kills = leaves = 0
    try:
        while kills < KILLS:
            time.sleep(rng.uniform(*CHANGE_EVERY))
            for member in members:
                member.keep_alive()
            member = rng.choice(members)
            if kills <= leaves:
                member.kill()
                kills += 1
            else:
                member.stop(restart=True)
                leaves += 1
        producer.join(60.0)
        assert sum(produced) == MESSAGES, "the producer did not finish"

        def settled() -> bool:
            for member in members:
                member.keep_alive()
            return kafka_helpers.committed_to_end(bootstrap, group, topic, MESSAGES)

        assert wait_until(settled, SETTLE_TIMEOUT, interval=0.5), "offsets never reached the end"
    finally:
        for member in members:
            if member.process.poll() is None:
                member.stop(restart=False)
    failed = sum(member.failed_transactions for member in members)
    print(f"{name}: {kills} kills, {leaves} graceful leaves, {failed} failed transactions")
    return read_results(bootstrap, topic + ".out"), failed


@pytest.mark.kafka
@pytest.mark.parametrize("protocol", ["classic", "consumer"])
def test_exactly_once_survives_kills_and_a_rebalance_storm(
    protocol: str, kafka_bootstrap: str
) -> None:
    started = time.monotonic()
    seed = chaos_seed()
    results, failed = run_storm(kafka_bootstrap, exactly_once=True, seed=seed, protocol=protocol)
    total = sum(len(numbers) for numbers in results.values())
    print(
        f"exactly-once ({protocol}): seed {seed}, {total} results, {failed} failed "
        f"transactions, {time.monotonic() - started:.1f}s"
    )
    assert total == MESSAGES, f"seed {seed}: {total} results for {MESSAGES} inputs"
    for key, numbers in results.items():
        assert numbers == list(range(len(numbers))), f"seed {seed}: key {key} out of order"


@pytest.mark.kafka
def test_at_least_once_duplicates_are_replays_after_kills(kafka_bootstrap: str) -> None:
    started = time.monotonic()
    seed = chaos_seed()
    results, failed = run_storm(kafka_bootstrap, exactly_once=False, seed=seed)
    assert failed == 0
    distinct = sum(len(set(numbers)) for numbers in results.values())
    total = sum(len(numbers) for numbers in results.values())
    restarts = {key: replays(numbers) for key, numbers in results.items()}
    replayed = sum(1 for count in restarts.values() if count > 0)
    print(
        f"at-least-once: seed {seed}, {total} results, {total - distinct} duplicates, "
        f"{replayed} of {len(results)} keys replayed after a kill, at most "
        f"{max(restarts.values())} times, {time.monotonic() - started:.1f}s"
    )
    assert distinct == MESSAGES, f"seed {seed}: results missing"
    for key, numbers in results.items():
        assert max(numbers) == len(set(numbers)) - 1, f"seed {seed}: key {key} skipped an input"
        assert 0 <= restarts[key] <= KILLS, f"seed {seed}: key {key} is no replay: {numbers}"
