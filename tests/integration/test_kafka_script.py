"""Tests of scripts/kafka, the `kafka_bootstrap` fixture and the shared Kafka test helpers."""

from __future__ import annotations

import json
import shutil
import socket
import ssl
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient
from kafka_helpers import (
    KAFKA_SCRIPT,
    committed_offsets,
    create_topic,
    end_offsets,
    produce,
    read_records,
    run_kafka_script,
    unique_name,
)
from secured_kafka import SecuredBroker, secured_document

from laneway.sources.embedded.partitioner import partition_for_key

pytestmark = pytest.mark.kafka


def test_broker_answers_a_metadata_request(kafka_bootstrap: str) -> None:
    metadata = AdminClient({"bootstrap.servers": kafka_bootstrap}).list_topics(timeout=10)
    brokers = {broker.id: f"{broker.host}:{broker.port}" for broker in metadata.brokers.values()}
    assert brokers == {1: kafka_bootstrap}
    assert metadata.controller_id == 1


def test_start_status_and_env_agree_on_the_running_broker(kafka_bootstrap: str) -> None:
    # Normally the fixture's broker is this checkout's, so `start` reuses it; when
    # LANEWAY_BROKER names another broker, this test starts (and stops) its own.
    started = run_kafka_script("start", timeout_s=900.0)
    assert started.returncode == 0, started.stderr
    address = started.stdout.strip()
    try:
        status = run_kafka_script("status", timeout_s=30.0)
        assert (status.returncode, status.stdout.strip()) == (0, address)
        env = run_kafka_script("env", timeout_s=30.0)
        assert env.stdout.strip() == f"export LANEWAY_BROKER={address}"
        again = run_kafka_script("start", timeout_s=30.0)
        assert (again.returncode, again.stdout.strip()) == (0, address)
        assert "already running" in again.stderr
        metadata = AdminClient({"bootstrap.servers": address}).list_topics(timeout=10)
        assert [f"{b.host}:{b.port}" for b in metadata.brokers.values()] == [address]
    finally:
        if "already running" not in started.stderr:
            assert run_kafka_script("stop", timeout_s=60.0).returncode == 0


def test_status_and_stop_without_a_broker(tmp_path: Path) -> None:
    scripts = tmp_path / "scripts"
    scripts.mkdir()
    shutil.copy2(KAFKA_SCRIPT, scripts / "kafka")
    shutil.copy2(KAFKA_SCRIPT.with_name("kafka-pom.xml"), scripts / "kafka-pom.xml")

    for command in ("status", "env"):
        result = run_kafka_script(command, timeout_s=30.0, script=scripts / "kafka")
        assert (result.returncode, result.stdout) == (1, "")
        assert "no broker running" in result.stderr
    stopped = run_kafka_script("stop", timeout_s=30.0, script=scripts / "kafka")
    assert stopped.returncode == 0
    assert "no broker running" in stopped.stderr
    assert run_kafka_script("bogus", timeout_s=30.0, script=scripts / "kafka").returncode == 2


def test_groups_runs_kafkas_own_consumer_group_command(kafka_bootstrap: str) -> None:
    # As above: the checkout's broker (the fixture's, normally), started if need be.
    started = run_kafka_script("start", timeout_s=900.0)
    assert started.returncode == 0, started.stderr
    address = started.stdout.strip()
    try:
        topic, group = unique_name("groups"), unique_name("groups-group")
        create_topic(address, topic, partitions=2)
        consumer = Consumer({"bootstrap.servers": address, "group.id": group})
        try:
            consumer.commit(
                offsets=[TopicPartition(topic, 0, 0), TopicPartition(topic, 1, 0)],
                asynchronous=False,
            )
        finally:
            consumer.close()
        produce(address, topic, [(b"k", b"v")] * 3)
        done = subprocess.run(
            [sys.executable, str(KAFKA_SCRIPT), "groups", "--describe", "--group", group],
            capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        rows = [line.split() for line in done.stdout.splitlines() if line.startswith(group)]
        ends = end_offsets(address, topic)
        # GROUP TOPIC PARTITION CURRENT-OFFSET LOG-END-OFFSET LAG ...
        assert sorted((int(r[2]), int(r[3]), int(r[4]), int(r[5])) for r in rows) == [
            (p, 0, ends[p], ends[p]) for p in sorted(ends)
        ]
        assert "INFO" not in done.stderr  # the admin client's chatter is left out
    finally:
        if "already running" not in started.stderr:
            assert run_kafka_script("stop", timeout_s=60.0).returncode == 0


def test_create_produce_read_and_commit_round_trip(kafka_bootstrap: str) -> None:
    topic = unique_name("roundtrip")
    group = unique_name("roundtrip-group")
    create_topic(kafka_bootstrap, topic, partitions=3)
    assert end_offsets(kafka_bootstrap, topic) == {0: 0, 1: 0, 2: 0}

    records = [
        (f"key-{i % 7}".encode(), f"value-{i}".encode(), [("n", str(i).encode())])
        for i in range(40)
    ]
    delivered = produce(kafka_bootstrap, topic, records)

    assert [partition for partition, _ in delivered] == [
        partition_for_key(key, 3) for key, _, _ in records
    ]
    per_partition = {p: sum(1 for q, _ in delivered if q == p) for p in range(3)}
    assert end_offsets(kafka_bootstrap, topic) == per_partition
    assert sum(per_partition.values()) == 40

    read = read_records(kafka_bootstrap, topic, count=40)
    by_position = {(r.partition, r.offset): (r.key, r.value, r.headers) for r in read}
    assert by_position == {
        position: (key, value, headers)
        for position, (key, value, headers) in zip(delivered, records, strict=True)
    }

    assert committed_offsets(kafka_bootstrap, group, topic) == {}
    consumer = Consumer({"bootstrap.servers": kafka_bootstrap, "group.id": group})
    try:
        commits = [
            TopicPartition(topic, p, end, f"done-through-{end}") for p, end in per_partition.items()
        ]
        consumer.commit(offsets=commits, asynchronous=False)
    finally:
        consumer.close()
    assert committed_offsets(kafka_bootstrap, group, topic) == {
        p: (end, f"done-through-{end}") for p, end in per_partition.items()
    }
    assert committed_offsets(kafka_bootstrap, group, unique_name("other-topic")) == {}


def test_produce_rejects_a_missing_topic(kafka_bootstrap: str) -> None:
    with pytest.raises(RuntimeError, match="undelivered"):
        produce(kafka_bootstrap, unique_name("missing"), [(b"k", b"v")], timeout_s=3.0)


def test_status_secured_describes_the_sasl_ssl_listener(
    kafka_bootstrap: str, kafka_secured: SecuredBroker
) -> None:
    text, kept_in = secured_document()
    document = json.loads(text)
    assert document["plaintext"] == kafka_bootstrap
    assert document["security.protocol"] == "SASL_SSL"
    assert document["sasl.mechanism"] == "SCRAM-SHA-512"
    assert set(document["users"]) == {"admin", "alice", "bob"}
    assert document["super_user"] == "admin"
    assert stat.S_IMODE(kept_in.stat().st_mode) == 0o600  # it holds the passwords

    # TLS with the test CA, for the loopback address the certificate names.
    context = ssl.create_default_context(cafile=kafka_secured.ca_location)
    host, _, port = kafka_secured.bootstrap.rpartition(":")
    with (
        socket.create_connection((host, int(port)), timeout=10) as sock,
        context.wrap_socket(sock, server_hostname=host) as tls,
    ):
        assert tls.version() is not None
    untrusted = ssl.create_default_context(cafile=kafka_secured.untrusted_ca)
    with (
        socket.create_connection((host, int(port)), timeout=10) as sock,
        pytest.raises(ssl.SSLCertVerificationError),
    ):
        untrusted.wrap_socket(sock, server_hostname=host)


def test_the_secured_listener_enforces_acls_for_scram_users_only(
    kafka_bootstrap: str, kafka_secured: SecuredBroker
) -> None:
    topic = unique_name("acl")
    create_topic(kafka_bootstrap, topic, partitions=1)

    def visible(user: str) -> bool:
        admin = AdminClient(kafka_secured.client_config(user))
        return topic in admin.list_topics(timeout=10).topics

    assert visible("admin")  # the super user
    assert not visible("bob")  # logged in, but no ACL grants him the topic
    assert (
        topic in AdminClient({"bootstrap.servers": kafka_bootstrap}).list_topics(timeout=10).topics
    )


def test_status_secured_without_a_broker(tmp_path: Path) -> None:
    scripts = tmp_path / "scripts"
    scripts.mkdir()
    shutil.copy2(KAFKA_SCRIPT, scripts / "kafka")
    done = subprocess.run(
        [sys.executable, str(scripts / "kafka"), "status", "--secured"],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert (done.returncode, done.stdout) == (1, "")
    assert "no broker running" in done.stderr
