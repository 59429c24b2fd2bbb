"""KIP-848's consumer group protocol by default, classic on request or on a cluster without
it: a broker of the test's own whose ``group.version`` feature is 0 answers KIP-848's
heartbeat as a broker before Kafka 4.0 does (UNSUPPORTED_VERSION)."""

from __future__ import annotations

import logging
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import ConsumerGroupType
from confluent_kafka.admin import AdminClient
from kafka_helpers import create_topic, produce, set_share_group_config, unique_name
from private_broker import PrivateBroker

import laneway
from laneway.errors import SourceError

pytestmark = pytest.mark.kafka


@pytest.fixture(scope="module")
def without_kip848(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    broker = PrivateBroker(tmp_path_factory.mktemp("kafka-before-4"), features="group.version=0")
    started = broker.run("start")
    assert started.returncode == 0, started.stderr
    try:
        yield started.stdout.strip()
    finally:
        broker.run("stop", timeout=120.0)


def topic_with_records(bootstrap: str, count: int) -> str:
    topic = unique_name("protocol")
    create_topic(bootstrap, topic, 2)
    produce(bootstrap, topic, [(b"k%d" % i, b"v") for i in range(count)])
    return topic


def test_kip848_is_the_default_where_the_cluster_has_it(kafka_bootstrap: str) -> None:
    topic, group = topic_with_records(kafka_bootstrap, 10), unique_name("kip848-default")
    source = laneway.KafkaSource(kafka_bootstrap, group, [topic])
    assert source.client_config["group.protocol"] == "consumer"
    consumer = laneway.Consumer(source, lambda m: None, handle_signals=False, drain_timeout=1)
    assert consumer.run(max_messages=10).processed == 10
    admin = AdminClient({"bootstrap.servers": kafka_bootstrap})
    described = admin.describe_consumer_groups([group])[group].result(timeout=30)
    assert described.type == ConsumerGroupType.CONSUMER


def test_a_cluster_without_kip848_gets_the_classic_protocol(
    without_kip848: str, caplog: pytest.LogCaptureFixture
) -> None:
    topic = topic_with_records(without_kip848, 20)
    source = laneway.KafkaSource(without_kip848, unique_name("fallback"), [topic])
    consumer = laneway.Consumer(source, lambda m: None, handle_signals=False)
    with caplog.at_level(logging.WARNING, logger="laneway.sources.kafka.source"):
        assert consumer.run(max_messages=20).processed == 20
    assert source.client_config["group.protocol"] == "classic"
    assert source.client_config["partition.assignment.strategy"] == "cooperative-sticky"
    ours = [r.getMessage() for r in caplog.records if r.name == "laneway.sources.kafka.source"]
    assert ["does not support KIP-848's consumer group protocol" in m for m in ours] == [True]


def test_kip848_asked_for_on_a_cluster_without_it_is_not_replaced(without_kip848: str) -> None:
    topic = topic_with_records(without_kip848, 5)
    config = {"group.protocol": "consumer"}
    source = laneway.KafkaSource(without_kip848, unique_name("asked"), [topic], config)
    consumer = laneway.Consumer(source, lambda m: None, handle_signals=False)
    with pytest.raises(SourceError, match="ConsumerGroupHeartbeat"):
        consumer.run(idle_timeout=10)


STATIC_MEMBER = """
import sys, laneway
bootstrap, group, topic, out = sys.argv[1:5]
source = laneway.KafkaSource(bootstrap, group, [topic], {"group.instance.id": "orders-0"})
def handle(message):
    with open(out, "a") as file:
        file.write(f"{message.offset}\\n")
laneway.Consumer(source, handle, handle_signals=False).run()
"""


def test_a_static_member_restarted_after_a_kill_takes_over_once_the_old_session_ends(
    kafka_bootstrap: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # Before: under KIP-848 the restarted member was refused fatally (UNRELEASED_INSTANCE_ID:
    # the killed one never left) and laneway run exited 3; now it joins again until the old
    # member's session ends (the group's consumer.session.timeout.ms, here 6 s).
    topic, group = topic_with_records(kafka_bootstrap, 4), unique_name("static")
    set_share_group_config(kafka_bootstrap, group, {"consumer.session.timeout.ms": "6000"})
    out = tmp_path / "first.log"
    first = subprocess.Popen(
        [sys.executable, "-c", STATIC_MEMBER, kafka_bootstrap, group, topic, str(out)]
    )
    try:
        deadline = time.monotonic() + 60
        while (
            not out.exists() or len(out.read_text().split()) < 4
        ) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert out.exists() and len(out.read_text().split()) == 4, "the first member read nothing"
    finally:
        first.kill()
        first.wait(30)
    killed = time.monotonic()
    produce(kafka_bootstrap, topic, [(b"after", b"v%d" % i) for i in range(4)])
    source = laneway.KafkaSource(kafka_bootstrap, group, [topic], {"group.instance.id": "orders-0"})
    consumer = laneway.Consumer(source, lambda m: None, handle_signals=False)
    with caplog.at_level(logging.WARNING, logger="laneway.sources.kafka.source"):
        stats = consumer.run(max_messages=4)
    took = time.monotonic() - killed
    assert stats.processed == 4
    assert "still holds a member with group.instance.id=orders-0" in caplog.text
    print(f"static member back after {took:.1f} s (6 s session)")
    assert took < 30, f"took {took:.1f} s for a 6 s session"
