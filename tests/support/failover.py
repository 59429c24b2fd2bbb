"""One failover run on the three-broker cluster: a steady producer, a laneway consumer (one
or more lives), a fault injected once the run is under way, and what it all did.

A run writes ``messages`` records (keys ``k0`` .. ``k39``, values the handler's work in
ms) to a fresh topic, replicated three times with ``min.insync.replicas=2``, at about
``rate`` a second from an idempotent producer that rides through outages; a consumer
handles them (``recording``: one line per call) and, for ``results`` and
``exactly-once``, writes one result per input to ``<topic>.out``. A life that ends with
an error (a transaction the failover aborted, a fatal client error) is followed by a new
one, as a supervisor would; the run ends (``stop()``) once everything is produced and
committed. :func:`check` asserts the promises and returns the figures.
"""

from __future__ import annotations

import os
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from itertools import pairwise
from pathlib import Path

import failover_results
import recording
from cluster import KafkaCluster, wait_for
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import NewTopic
from kafka_helpers import committed_offsets, end_offsets, set_share_group_config, unique_name

import laneway
from laneway.types import Message

KEYS = 40
PARTITIONS = 4
MAX_BUFFERED = 500
LIVES = 6
"""At most this many consumer lives per run (a failover may end a few)."""
LIFE_S = 600.0
"""A life still running this long is stopped (and the run fails its checks)."""


def produce_steadily(
    bootstrap: str, topic: str, messages: int, rate: float, done: list[int]
) -> None:
    """``messages`` records at about ``rate`` a second through whatever the brokers do."""
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "enable.idempotence": True,
            "acks": "all",
            "linger.ms": 5,
            "message.timeout.ms": 180_000,
            "reconnect.backoff.max.ms": 500,
        }
    )
    failures: list[str] = []

    def delivered(error: KafkaError | None, _record: object) -> None:
        if error is not None:
            failures.append(str(error))

    began = time.monotonic()
    for i in range(messages):
        producer.produce(topic, b"2", f"k{i % KEYS}".encode(), on_delivery=delivered)
        producer.poll(0)
        ahead = began + (i + 1) / rate - time.monotonic()
        if ahead > 0:
            time.sleep(ahead)
    assert producer.flush(180.0) == 0 and not failures, f"produce failed: {failures[:3]}"
    done.append(messages)


@dataclass
class Run:
    """What one failover run did (filled in by :func:`failover_run`)."""

    topic: str
    group: str
    engine: str
    mode: str
    protocol: str
    fault_at: float = 0.0
    fault: str = ""
    lives: list[tuple[float, float, str]] = field(default_factory=list)
    """(began, ended, how it ended) of each consumer life."""
    rebalances: int = 0
    calls: list[recording.Call] = field(default_factory=list)


def failover_run(
    cluster: KafkaCluster,
    record_dir: Path,
    engine: str,
    mode: str,
    protocol: str,
    fault: Callable[[str, str], str],
    messages: int = 3000,
    rate: float = 150.0,
) -> Run:
    """Produce, consume, and call ``fault(topic, group)`` (which returns what it did) once
    a quarter of the messages were handled."""
    bootstrap = cluster.bootstrap
    topic = cluster.create_topic(PARTITIONS, prefix=f"failover-{mode}")
    if mode != "at-least-once":
        out = NewTopic(f"{topic}.out", num_partitions=PARTITIONS, replication_factor=3,
                       config={"min.insync.replicas": "2"})  # fmt: skip
        cluster.admin.create_topics([out])[out.topic].result(timeout=60)
        os.environ[failover_results.OUT] = out.topic  # process-engine workers inherit it
    group = unique_name("failover-group")
    run = Run(topic, group, engine, mode, protocol)
    group_settings: dict[str, object] = {"group.protocol": protocol}
    if protocol == "classic":
        group_settings.update({"session.timeout.ms": 6000, "heartbeat.interval.ms": 500})
    produced: list[int] = []
    producer = threading.Thread(
        target=produce_steadily, args=(bootstrap, topic, messages, rate, produced)
    )
    producer.start()
    injected = threading.Event()

    def inject() -> None:
        if not wait_for_calls(record_dir, messages // 4, 120.0):
            return
        run.fault_at = time.monotonic()
        run.fault = fault(topic, group)
        injected.set()

    injector = threading.Thread(target=inject)
    injector.start()
    try:
        for life in range(LIVES):
            if protocol == "consumer" and life == 0:
                wait_for("the group to exist", lambda: _set_session(bootstrap, group), 60.0)
            began = time.monotonic()
            consumer = laneway.Consumer(
                laneway.KafkaSource(
                    bootstrap, group, [topic], group_settings,
                    transactional_id=f"{group}-member" if mode == "exactly-once" else None,
                ),
                _handler(engine, mode, f"{topic}.out"),
                engine=engine,  # type: ignore[arg-type]
                ordering="key",
                concurrency=1 if engine == "sync" else 8,
                max_buffered=MAX_BUFFERED,
                commit_interval=0.5,
                drain_timeout=5.0,
                exactly_once=mode == "exactly-once",
                handle_signals=False,
            )  # fmt: skip
            ended = "done"
            done = threading.Event()
            watcher = threading.Thread(
                target=_stop_when_done,
                args=(consumer, done, lambda: bool(produced) and injected.is_set(), bootstrap, run),
            )
            watcher.start()
            try:
                stats = consumer.run()
                run.rebalances += stats.rebalances
            except laneway.LanewayError as error:
                ended = f"{type(error).__name__}: {str(error)[:120]}"
            finally:
                done.set()
                watcher.join(30)
            run.lives.append((began, time.monotonic(), ended))
            if ended == "done":
                break
    finally:
        producer.join(300)
        injector.join(300)
    run.calls = recording.read_calls(record_dir)
    return run


def _stop_when_done(
    consumer: laneway.Consumer,
    done: threading.Event,
    ready: Callable[[], bool],
    bootstrap: str,
    run: Run,
) -> None:
    """Stop ``consumer`` once everything is produced, the fault is over and every record is
    committed (checked every second), or after :data:`LIFE_S`: a stuck run fails."""
    deadline = time.monotonic() + LIFE_S
    while not done.wait(1.0):
        if time.monotonic() > deadline or (
            ready() and everything_committed(bootstrap, run.group, run.topic)
        ):
            consumer.stop()
            return


def _set_session(bootstrap: str, group: str) -> bool:
    """A 6 s session for a KIP-848 group (the cluster's floor), as an operator would set it."""
    set_share_group_config(
        bootstrap,
        group,
        {"consumer.session.timeout.ms": "6000", "consumer.heartbeat.interval.ms": "1000"},
    )
    return True


def _handler(engine: str, mode: str, out: str) -> laneway.Handler:
    if mode == "at-least-once":
        return recording.handle_async if engine == "async" else recording.handle
    if engine == "process":
        return failover_results.handle
    if engine != "async":
        return failover_results.handle

    async def handle(message: Message) -> laneway.Produce:
        return failover_results.handle(message)

    return handle


def wait_for_calls(record_dir: Path, count: int, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if len(recording.read_calls(record_dir)) >= count:
            return True
        time.sleep(0.2)
    return False


def everything_committed(bootstrap: str, group: str, topic: str) -> bool:
    ends = end_offsets(bootstrap, topic)
    committed = committed_offsets(bootstrap, group, topic)
    return {p: o for p, (o, _) in committed.items()} == ends


def read_results(bootstrap: str, topic: str, committed_only: bool) -> Counter[str]:
    """How many times each ``partition:offset`` result is in ``topic``."""
    ends = end_offsets(bootstrap, topic)
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": unique_name("failover-reader"),
            "isolation.level": "read_committed" if committed_only else "read_uncommitted",
            "enable.partition.eof": True,
        }
    )
    consumer.assign([TopicPartition(topic, p, 0) for p in ends])
    found: Counter[str] = Counter()
    pending = {p for p, end in ends.items() if end}
    deadline = time.monotonic() + 60
    while pending and time.monotonic() < deadline:
        for record in consumer.consume(500, 1.0):
            error = record.error()
            if error is not None:
                if error.code() == KafkaError._PARTITION_EOF:
                    pending.discard(record.partition())
                continue
            found[(record.value() or b"").decode()] += 1
    consumer.close()
    return found


@dataclass
class Figures:
    """What :func:`check` measured: ``recovery``, the longest a partition went without a
    record starting from the fault on; ``duplicates`` calls beyond one per record."""

    handled: int
    duplicates: int
    recovery: float
    lives: int
    rebalances: int


def check(run: Run, bootstrap: str) -> Figures:
    """Nothing lost, key order kept in each life, duplicates bounded by what a life or a
    rebalance may leave uncommitted, results (exactly once under exactly-once), every
    partition committed to its end; returns the figures."""
    ends = end_offsets(bootstrap, run.topic)
    wanted = {(p, o) for p, end in ends.items() for o in range(end)}
    calls = run.calls
    assert run.fault, "the fault was never injected"
    assert {(c.partition, c.offset) for c in calls} == wanted, "records lost"
    assert everything_committed(bootstrap, run.group, run.topic), "a partition is stuck"
    duplicates = recording.duplicates(calls)
    windows = len(run.lives) + run.rebalances
    assert duplicates <= windows * MAX_BUFFERED, f"{duplicates} duplicates for {windows} windows"
    for began, ended, _ in run.lives:
        life = [c for c in calls if began <= c.start <= ended]
        assert not _order_problems(life), _order_problems(life)[:5]
    if run.mode != "at-least-once":
        results = read_results(bootstrap, f"{run.topic}.out", run.mode == "exactly-once")
        expected = {f"{p}:{o}" for p, o in wanted}
        assert set(results) == expected, "results missing"
        if run.mode == "exactly-once":
            twice = [r for r, n in results.items() if n > 1]
            assert not twice, f"results seen more than once: {twice[:5]}"
    return Figures(len(wanted), duplicates, _recovery(calls, run.fault_at), len(run.lives),
                   run.rebalances)  # fmt: skip


def _order_problems(calls: list[recording.Call]) -> list[str]:
    """In one life: a key's calls never overlap, and the first call of each offset of a
    key comes in offset order (replays of offsets already run are the duplicates)."""
    lanes: dict[tuple[int, str], list[recording.Call]] = defaultdict(list)
    for call in calls:
        lanes[(call.partition, call.key)].append(call)
    problems = []
    for lane, lane_calls in lanes.items():
        lane_calls.sort(key=lambda c: c.start)
        for before, after in pairwise(lane_calls):
            if after.start < before.end:
                problems.append(f"{lane}: {before.offset} and {after.offset} overlapped")
        seen: set[int] = set()
        last = -1
        for call in lane_calls:
            if call.offset in seen:
                continue
            if call.offset < last:
                problems.append(f"{lane}: {call.offset} first ran after {last}")
            seen.add(call.offset)
            last = max(last, call.offset)
    return problems


def _recovery(calls: list[recording.Call], fault_at: float) -> float:
    """The longest time a partition went without a record starting, from the fault on:
    the outage as a reader of the partition sees it (records produced meanwhile included,
    since the producer waits for the partition's new leader too)."""
    starts: dict[int, list[float]] = defaultdict(list)
    for call in calls:
        starts[call.partition].append(call.start)
    longest = 0.0
    for times in starts.values():
        times.sort()
        for before, after in pairwise(times):
            if after >= fault_at:
                longest = max(longest, after - max(before, fault_at))
    return longest


def java_hash(text: str) -> int:
    """Java's ``String.hashCode``, which Kafka hashes a transactional id with."""
    value = 0
    for char in text:
        value = (31 * value + ord(char)) & 0xFFFFFFFF
    return value - 2**32 if value >= 2**31 else value


def transaction_coordinator(cluster: KafkaCluster, transactional_id: str) -> int:
    """The broker leading the ``__transaction_state`` partition of ``transactional_id``."""
    found = cluster.admin.list_topics("__transaction_state", timeout=10).topics
    partitions = found["__transaction_state"].partitions
    code = java_hash(transactional_id)
    partition = (0 if code == -(2**31) else abs(code)) % len(partitions)
    return int(partitions[partition].leader)


def wait_settled(cluster: KafkaCluster) -> None:
    """Every broker back and the cluster listing all three."""
    cluster.heal()
    wait_for("three brokers", lambda: len(cluster.admin.list_topics(timeout=10).brokers) == 3)
    time.sleep(1.0)
