"""A consumer with laneway's default options on a broker as it comes: every engine reads
everything, in key order, and commits it; the group protocol is the one the broker serves."""

from __future__ import annotations

import logging
import threading
from collections import defaultdict

import pytest
from confluent_kafka import ConsumerGroupType
from confluent_kafka.admin import AdminClient
from conftest import CompatBroker
from engines import ENGINES
from kafka_helpers import committed_offsets, create_topic, end_offsets, produce, unique_name

import laneway

pytestmark = pytest.mark.compat

RECORDS = 400
RUN_LIMIT_S = 90.0


def run_bounded(consumer: laneway.Consumer, **run: object) -> laneway.ConsumerStats:
    """``consumer.run(**run)`` on a thread; stopped and failed if it outlasts the limit (a
    consumer that joins no group would otherwise wait for good)."""
    done: list[laneway.ConsumerStats] = []
    thread = threading.Thread(target=lambda: done.append(consumer.run(**run)))  # type: ignore[arg-type]
    thread.start()
    thread.join(RUN_LIMIT_S)
    if thread.is_alive():
        consumer.stop()
        thread.join(60)
        pytest.fail(f"the run did not end within {RUN_LIMIT_S:g} s: {consumer.stats()}")
    return done[0]


@pytest.mark.parametrize("engine", ENGINES)
def test_the_default_consumer_reads_everything_in_key_order(
    compat_broker: CompatBroker, engine: str, caplog: pytest.LogCaptureFixture
) -> None:
    bootstrap = compat_broker.bootstrap
    topic, group = unique_name("compat-in"), unique_name("compat-default")
    create_topic(bootstrap, topic, 4)
    produce(bootstrap, topic, [(b"k%d" % (i % 40), b"%d" % i) for i in range(RECORDS)])
    seen: dict[bytes, list[int]] = defaultdict(list)
    lock = threading.Lock()

    def handle(message: laneway.Message) -> None:
        with lock:
            seen[message.key or b""].append(int(message.value or b"0"))

    async def handle_async(message: laneway.Message) -> None:
        handle(message)

    if engine == "process":
        import process_handlers

        handler: object = process_handlers.noop
    else:
        handler = handle_async if engine == "async" else handle
    source = laneway.KafkaSource(bootstrap, group, [topic])
    consumer = laneway.Consumer(source, handler, engine=engine, handle_signals=False)  # type: ignore[call-overload]
    with caplog.at_level(logging.WARNING, logger="laneway.sources.kafka.source"):
        stats = run_bounded(consumer, max_messages=RECORDS)

    assert stats.processed == RECORDS
    if engine != "process":  # the process engine's handler runs in other processes
        assert sum(len(values) for values in seen.values()) == RECORDS
        assert all(values == sorted(values) for values in seen.values())
    committed = {p: offset for p, (offset, _) in committed_offsets(bootstrap, group, topic).items()}
    assert committed == end_offsets(bootstrap, topic)
    fallbacks = [r for r in caplog.records if "does not support KIP-848" in r.getMessage()]
    admin = AdminClient({"bootstrap.servers": bootstrap})
    described = admin.describe_consumer_groups([group], request_timeout=10)
    kind = described[group].result(timeout=30).type
    if compat_broker.has_kip848:
        assert (kind, fallbacks) == (ConsumerGroupType.CONSUMER, [])
    else:  # Kafka 3.9 takes no KIP-848 member in: one WARNING, then the classic protocol
        assert kind == ConsumerGroupType.CLASSIC
        assert len(fallbacks) == 1
        assert "group.protocol=classic" in fallbacks[0].getMessage()


def test_kip848_forced_where_the_broker_lacks_it_is_an_error_and_not_ready(
    compat_broker: CompatBroker, caplog: pytest.LogCaptureFixture
) -> None:
    if compat_broker.has_kip848:
        pytest.skip("this broker serves KIP-848's protocol: nothing to refuse")
    bootstrap = compat_broker.bootstrap
    topic, group = unique_name("compat-forced"), unique_name("compat-forced")
    create_topic(bootstrap, topic, 2)
    produce(bootstrap, topic, [(b"k", b"v")] * 10)
    source = laneway.KafkaSource(bootstrap, group, [topic], {"group.protocol": "consumer"})
    consumer = laneway.Consumer(source, lambda m: None, handle_signals=False)
    reasons: list[str] = []
    watching = threading.Event()

    def watch_readiness() -> None:
        while not watching.wait(0.5):
            health = consumer.health()
            if health.state == "running" and not health.ready:
                reasons.append(health.reason)

    watcher = threading.Thread(target=watch_readiness)
    watcher.start()
    with caplog.at_level(logging.ERROR, logger="laneway.sources.kafka.source"):
        stats = run_bounded(consumer, idle_timeout=30)
    watching.set()
    watcher.join()
    assert stats.processed == 0
    assert any(f"not in group {group!r}" in reason for reason in reasons), reasons
    errors = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
    assert len(errors) == 1, errors
    assert f"not in group {group!r}" in errors[0]
    assert "group.protocol=consumer" in errors[0]
    assert "holds the group in state" in errors[0]
