"""The ``share`` scenario's trivial loops: a bare ``ShareConsumer`` loop against laneway's
share source on the same topic, and the share-group configs the scenario sets.

Both loops read the whole topic with a fresh share group that starts at the earliest
record, fetching ``fetch`` records at a time (``max.poll.records``), and handle each record
with no work. Runtime: first record -> last acknowledged (the bare loop includes its final
``commit_sync``; the consumer: first fetch -> last settled, :attr:`Stats.elapsed`).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace

from confluent_kafka import AcknowledgeType, KafkaException, ShareConsumer
from confluent_kafka.admin import (  # type: ignore[attr-defined]
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ResourceType,
)

from laneway.bench.engines.targets import KafkaTarget, unique_name
from laneway.consumer import Consumer
from laneway.sources.share.source import KafkaShareSource

FAST_HEARTBEAT_MS = 500
"""Share groups here beat twice a second when the broker allows it (Kafka's default minimum
is 5 s; ``scripts/kafka`` allows 0.5 s), so members join sooner; joining is not timed."""
DEFAULT_HEARTBEAT_MS = 5_000
ADMIN_TIMEOUT_S = 30.0


@dataclass(frozen=True)
class TrivialRow:
    """One trivial-throughput loop: ``expected`` records in the topic, ``messages`` read;
    ``tps_runs`` holds every round's msg/s once :func:`best` combined the rounds."""

    loop: str
    expected: int
    messages: int
    runtime_s: float
    tps: float
    tps_runs: tuple[float, ...] = ()


class TrivialLoops:
    """Runs each loop once per call on a topic of ``target``, ``fetch`` records a fetch.
    The bare loop gives up after ``timeout_s``, the consumer after ``timeout_s`` without a
    record (then a loop reads fewer records than expected, which :func:`best` shows)."""

    def __init__(self, target: KafkaTarget, fetch: int, timeout_s: float) -> None:
        self._target = target
        self._fetch = fetch
        self._timeout_s = timeout_s
        self._admin = AdminClient({"bootstrap.servers": target.bootstrap_servers})

    def bare(self, topic: str, messages: int) -> TrivialRow:
        """Poll, acknowledge each record (ACCEPT), commit once at the end."""
        group = unique_name(self._target.topic_prefix, "share-bare")
        fast_heartbeat(self._admin, group)
        _start_at_earliest(self._admin, group)
        consumer = ShareConsumer(
            {
                "bootstrap.servers": self._target.bootstrap_servers,
                "group.id": group,
                "share.acknowledgement.mode": "explicit",
                "max.poll.records": self._fetch,
            }
        )
        consumer.subscribe([topic])
        acknowledge, accept = consumer.acknowledge, AcknowledgeType.ACCEPT
        count, first = 0, 0.0
        deadline = time.monotonic() + self._timeout_s
        while count < messages and time.monotonic() < deadline:
            batch = consumer.poll(0.1)
            if batch and not first:
                first = time.perf_counter()
            for message in batch:
                acknowledge(message, accept)
            count += len(batch)
        consumer.commit_sync()
        runtime = time.perf_counter() - first if first else 0.0
        consumer.close()
        tps = count / runtime if runtime > 0 else 0.0
        return TrivialRow("bare ShareConsumer loop", messages, count, runtime, tps)

    def source(self, topic: str, messages: int) -> TrivialRow:
        """A sync-engine :class:`Consumer` on a :class:`KafkaShareSource`, ``unordered``."""
        group = unique_name(self._target.topic_prefix, "share-laneway")
        fast_heartbeat(self._admin, group)
        source = KafkaShareSource(
            self._target.bootstrap_servers,
            group,
            [topic],
            {"max.poll.records": self._fetch},
            crash_journal=False,
        )
        consumer = Consumer(
            source,
            _nothing,
            engine="sync",
            ordering="unordered",
            poll_batch_size=self._fetch,
            handle_signals=False,
        )
        stats = consumer.run(max_messages=messages, idle_timeout=self._timeout_s)
        return TrivialRow(
            "KafkaShareSource, sync engine",
            messages,
            stats.handled,
            stats.elapsed,
            stats.throughput,
        )


def best(rounds: list[TrivialRow]) -> TrivialRow:
    """The fastest round, carrying every round's msg/s (the machine is noisy) and, when a
    round read more or fewer records than expected, that round's count (so it is seen)."""
    fastest = max(rounds, key=lambda row: row.tps)
    wrong = [row.messages for row in rounds if row.messages != row.expected]
    return replace(
        fastest,
        messages=wrong[0] if wrong else fastest.messages,
        tps_runs=tuple(row.tps for row in rounds),
    )


def fast_heartbeat(admin: AdminClient, group: str) -> int:
    """Ask for :data:`FAST_HEARTBEAT_MS` on share group ``group`` before it exists; return
    the heartbeat in force (Kafka's default where the broker refuses it)."""
    entry = ConfigEntry(
        "share.heartbeat.interval.ms",
        str(FAST_HEARTBEAT_MS),
        incremental_operation=AlterConfigOpType.SET,
    )
    resource = ConfigResource(ResourceType.GROUP, group, incremental_configs=[entry])
    try:
        admin.incremental_alter_configs([resource])[resource].result(ADMIN_TIMEOUT_S)
    except KafkaException:
        return DEFAULT_HEARTBEAT_MS
    return FAST_HEARTBEAT_MS


def _start_at_earliest(admin: AdminClient, group: str) -> None:
    """The bare loop's group reads the backlog (a new share group starts at the latest)."""
    entry = ConfigEntry(
        "share.auto.offset.reset", "earliest", incremental_operation=AlterConfigOpType.SET
    )
    resource = ConfigResource(ResourceType.GROUP, group, incremental_configs=[entry])
    admin.incremental_alter_configs([resource])[resource].result(ADMIN_TIMEOUT_S)


def _nothing(message: object) -> None:
    """The trivial handler."""
