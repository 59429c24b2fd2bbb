"""Chaos: the Kafka broker restarted in the middle of a run.

The test runs its own broker (a copy of ``scripts/kafka`` in a temporary directory,
sharing this checkout's downloaded jars), so bouncing it never disturbs other tests or
other users of the session broker. ``scripts/kafka restart`` stops it and starts it
again on the same ports with the same storage; meanwhile a producer keeps writing and
the consumer must ride through the outage: nothing lost, nothing handled twice, lane
order kept, committed offsets at the log end. Under both rebalance protocols: the group
coordinator restarts too, and a KIP-848 member must carry on with its member epoch.
"""

from __future__ import annotations

import logging
import os
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import kafka_helpers
import pytest
import recording
from chaos_harness import CONSUMER_GROUP, PROTOCOLS, Progress, wait_until
from confluent_kafka import KafkaError, Producer
from private_broker import PrivateBroker

import laneway
from laneway.sources.base import IgnoreRebalances
from laneway.sources.kafka import source as kafka_source_module
from laneway.sources.share import source as share_source_module
from laneway.sources.share.acknowledgement import Acknowledgement

pytestmark = pytest.mark.kafka

MESSAGES = 20_000
CHUNKS = 20
PRODUCE_SECONDS = 6.0
PARTITIONS = 4
KEYS = 100
PROTOCOL_CONFIG: dict[str, dict[str, object]] = {"classic": {}, "consumer": CONSUMER_GROUP}
"""The client's group settings per rebalance protocol (the classic one with its defaults)."""


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PrivateBroker]:
    broker = PrivateBroker(tmp_path_factory.mktemp("private-kafka"))
    started = broker.run("start")
    assert started.returncode == 0, started.stderr
    broker.address = started.stdout.strip()
    try:
        yield broker
    finally:
        broker.run("stop", timeout=120.0)


class PacedProducer:
    """Produces MESSAGES in CHUNKS over about PRODUCE_SECONDS with an idempotent producer,
    never across the broker's restart: :meth:`hold` waits until the chunk under way is
    acknowledged and holds the next one; :meth:`go_on` lets it go on with a producer made
    after the restart. (One producer through the restart sometimes never got its producer id
    again, "Coordinator load in progress" and then nothing, and its chunk never flushed:
    a librdkafka client of the test's, not laneway. The consumer rides through the restart
    either way: it is what the test is about.)"""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self.bootstrap, self.topic = bootstrap, topic
        self.done: list[int] = []
        self._may_produce = threading.Event()
        self._may_produce.set()
        self._between_chunks = threading.Event()
        self._renew = False

    def hold(self) -> None:
        self._may_produce.clear()
        assert self._between_chunks.wait(120.0), "a chunk did not flush before the restart"

    def go_on(self) -> None:
        self._renew = True
        self._may_produce.set()

    def _producer(self) -> Producer:
        return Producer(
            {
                "bootstrap.servers": self.bootstrap,
                "enable.idempotence": True,
                "partitioner": "murmur2_random",
                "linger.ms": 5,
                "reconnect.backoff.max.ms": 500,
            }
        )

    def run(self) -> None:
        producer = self._producer()
        failures: list[str] = []

        def delivered(error: KafkaError | None, _message: object) -> None:
            if error is not None:
                failures.append(str(error))

        per_chunk = MESSAGES // CHUNKS
        for chunk in range(CHUNKS):
            self._between_chunks.set()
            self._may_produce.wait()
            self._between_chunks.clear()
            if self._renew:
                self._renew = False
                producer = self._producer()
            for i in range(per_chunk):
                key = f"key-{(chunk + i) % KEYS}".encode()
                producer.produce(self.topic, b"0.2", key, on_delivery=delivered)
            assert producer.flush(120.0) == 0 and not failures, f"produce failed: {failures[:3]}"
            self.done.append(per_chunk)
            time.sleep(PRODUCE_SECONDS / CHUNKS)
        self._between_chunks.set()


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_the_consumer_rides_through_a_broker_restart(
    protocol: str, broker: PrivateBroker, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(recording.RECORD_DIR, str(tmp_path))
    bootstrap = broker.address
    topic = kafka_helpers.unique_name("chaos-broker")
    group = kafka_helpers.unique_name("chaos-broker-group")
    kafka_helpers.create_topic(bootstrap, topic, PARTITIONS)
    paced = PacedProducer(bootstrap, topic)
    producer = threading.Thread(target=paced.run)
    producer.start()
    consumer = laneway.Consumer(
        laneway.KafkaSource(bootstrap, group, [topic], PROTOCOL_CONFIG[protocol]),
        recording.handle,
        engine="thread",
        ordering="key",
        concurrency=8,
        max_buffered=1_000,
        commit_interval=0.2,
        handle_signals=False,
    )
    outcome: list[laneway.ConsumerStats | BaseException] = []

    def consume() -> None:
        try:
            outcome.append(consumer.run(max_messages=MESSAGES, idle_timeout=60.0))
        except BaseException as error:
            outcome.append(error)

    runner = threading.Thread(target=consume)
    runner.start()
    progress = Progress(tmp_path)
    try:
        assert wait_until(lambda: progress.calls() >= MESSAGES // 5, 60.0), "no progress"
        paced.hold()
        before = progress.calls()
        restarted = broker.run("restart", timeout=180.0)
        back = time.monotonic()
        paced.go_on()
        assert restarted.returncode == 0, restarted.stderr
        assert restarted.stdout.strip() == bootstrap, "the broker came back elsewhere"
        producer.join(180.0)
        runner.join(180.0)
    finally:
        if runner.is_alive():
            consumer.stop()
            runner.join(30.0)
    [stats] = outcome
    assert isinstance(stats, laneway.ConsumerStats), f"the consumer failed: {stats!r}"
    assert sum(paced.done) == MESSAGES

    calls = recording.read_calls(tmp_path)
    ends = kafka_helpers.end_offsets(bootstrap, topic)
    print(
        f"broker restart: {before} handled before it, {len(calls)} calls for "
        f"{MESSAGES} messages, {recording.duplicates(calls)} duplicates"
    )
    assert before < MESSAGES // 2, "the restart came too late to matter"
    assert sum(1 for c in calls if c.start > back) > MESSAGES // 4, "little was left after it"
    assert {(c.partition, c.offset) for c in calls} == {
        (p, o) for p, end in ends.items() for o in range(end)
    }
    assert stats.processed == MESSAGES and stats.failed == 0
    assert recording.duplicates(calls) == 0
    assert recording.order_violations(calls, "key") == []
    committed = kafka_helpers.committed_offsets(bootstrap, group, topic)
    assert {p: o for p, (o, _) in committed.items()} == ends


def test_restart_without_a_running_broker_fails_clearly(tmp_path: Path) -> None:
    idle = PrivateBroker(tmp_path)
    result = idle.run("restart", timeout=60.0)
    assert (result.returncode, result.stdout) == (1, "")
    assert "no broker was started here" in result.stderr


def test_restart_brings_back_a_broker_killed_with_sigkill(broker: PrivateBroker) -> None:
    # A broker that crashed (kill -9: no pid to stop, storage left as it was) comes back
    # on its ports with its storage, never formatted afresh.
    topic = kafka_helpers.unique_name("killed-broker")
    kafka_helpers.create_topic(broker.address, topic, 2)
    kafka_helpers.produce(broker.address, topic, [(b"k", f"v{i}".encode()) for i in range(30)])
    ends = kafka_helpers.end_offsets(broker.address, topic)
    pid = broker.pid()
    os.killpg(pid, signal.SIGKILL)
    assert wait_until(lambda: not Path(f"/proc/{pid}").exists(), 10.0), "the broker outlived -9"
    restarted = broker.run("restart", timeout=180.0)
    assert restarted.returncode == 0, restarted.stderr
    assert restarted.stdout.strip() == broker.address
    assert "(not running)" in restarted.stderr
    assert broker.pid() != pid
    assert kafka_helpers.end_offsets(broker.address, topic) == ends


def test_a_share_member_stops_while_its_broker_does_not_answer(
    broker: PrivateBroker,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # librdkafka's share consumer waits in close() for the broker to confirm the last
    # acknowledgements and the leave: a frozen broker (SIGSTOP: connections open, nothing
    # answered) must not keep a stopping member alive past laneway's close bound.
    monkeypatch.setattr(share_source_module, "CLOSE_TIMEOUT_S", 2.0)
    bootstrap = broker.address
    topic = kafka_helpers.unique_name("chaos-share")
    group = kafka_helpers.unique_name("chaos-share-group")
    kafka_helpers.create_topic(bootstrap, topic, 1)
    kafka_helpers.produce(bootstrap, topic, [(None, b"%d" % i) for i in range(20)])
    journal = tmp_path / "journal"
    source = kafka_helpers.share_source(bootstrap, group, [topic], crash_journal=journal)
    source.open(IgnoreRebalances())  # a share group assigns nothing
    fetched: list[laneway.Message] = []
    deadline = time.monotonic() + 30.0
    while not fetched and time.monotonic() < deadline:
        fetched = source.poll(1_000, 0.2)
    assert fetched, "the share group delivered nothing"
    source.acknowledge(fetched, Acknowledgement.ACCEPT)  # to be sent by close()
    pid = broker.pid()
    os.kill(pid, signal.SIGSTOP)
    try:
        started = time.monotonic()
        with caplog.at_level(logging.ERROR, logger="laneway.sources.share.source"):
            source.close()
        took = time.monotonic() - started
    finally:
        os.kill(pid, signal.SIGCONT)
    assert "did not close within 2 s" in caplog.text, "close() was not left behind"
    assert took < 12.0, f"close() held the member {took:.1f} s"
    assert not list(journal.glob("member-*.journal")), "the crash journal was not closed"
    source.close()  # idempotent, even after a close left behind


class Assigned(IgnoreRebalances):
    """Notes that partitions were assigned."""

    def __init__(self) -> None:
        self.positions: dict[object, object] = {}

    def on_assigned(self, positions: Any) -> None:
        self.positions.update(positions)


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_a_group_member_stops_while_its_broker_does_not_answer(
    broker: PrivateBroker,
    protocol: str,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # librdkafka's close() leaves the group and waits for its threads: a frozen broker
    # (SIGSTOP: connections open, nothing answered) must not keep a stopping member (and its
    # SIGTERM) waiting past laneway's close bound.
    monkeypatch.setattr(kafka_source_module, "CLOSE_TIMEOUT_S", 2.0)
    bootstrap = broker.address
    topic = kafka_helpers.unique_name("chaos-close")
    kafka_helpers.create_topic(bootstrap, topic, 2)
    config = {**PROTOCOL_CONFIG[protocol], "group.protocol": protocol}
    source = laneway.KafkaSource(bootstrap, kafka_helpers.unique_name("g"), [topic], config)
    listener = Assigned()
    source.open(listener)
    deadline = time.monotonic() + 30.0
    while not listener.positions and time.monotonic() < deadline:
        source.poll(100, 0.2)
    assert listener.positions, "nothing was assigned"
    pid = broker.pid()
    os.kill(pid, signal.SIGSTOP)
    try:
        started = time.monotonic()
        with caplog.at_level(logging.ERROR, logger="laneway.sources.kafka.source"):
            source.close()
        took = time.monotonic() - started
    finally:
        os.kill(pid, signal.SIGCONT)
    # librdkafka gives up on a frozen broker after 5 s by itself (measured, both protocols):
    # laneway's bound, 2 s here, must have ended the wait first.
    assert "did not close within 2 s" in caplog.text, "close() was not left behind"
    assert took < 10.0, f"close() held the member {took:.1f} s"
    source.close()  # idempotent, even after a close left behind
