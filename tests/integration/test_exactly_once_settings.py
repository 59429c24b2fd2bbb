"""Exactly-once's settings on a real broker: what is refused, what the producer runs with,
and ``laneway run --transactional-id``."""

from __future__ import annotations

import logging
import subprocess
import sys

import pytest
from kafka_helpers import create_topic, produce, unique_name

import laneway
from laneway.errors import ConfigError
from laneway.sources.kafka.source import KafkaSource


def transform(message: laneway.Message) -> laneway.Produce:
    return laneway.Produce(f"{message.topic}.out", message.value, message.key)


@pytest.mark.kafka
def test_read_uncommitted_with_exactly_once_is_refused_naming_the_setting(
    kafka_bootstrap: str,
) -> None:
    topic = unique_name("eos-isolation")
    create_topic(kafka_bootstrap, topic, 1)
    create_topic(kafka_bootstrap, f"{topic}.out", 1)
    produce(kafka_bootstrap, topic, [(b"k", b"v")])
    uncommitted = {"isolation.level": "read_uncommitted"}

    def source() -> KafkaSource:
        return KafkaSource(kafka_bootstrap, unique_name("eos-isolation"), [topic], uncommitted)

    refused = laneway.Consumer(source(), transform, exactly_once=True, handle_signals=False)
    with pytest.raises(ConfigError, match=r"isolation.level'\]='read_uncommitted'.*exactly_once"):
        refused.run(max_messages=1, idle_timeout=30)
    at_least_once = laneway.Consumer(source(), transform, handle_signals=False)
    assert at_least_once.run(max_messages=1, idle_timeout=30).processed == 1


@pytest.mark.kafka
def test_the_transactional_producer_times_out_in_10_s_unless_the_config_says(
    kafka_bootstrap: str, caplog: pytest.LogCaptureFixture
) -> None:
    topic = unique_name("eos-timeout")
    create_topic(kafka_bootstrap, topic, 1)
    with caplog.at_level(logging.DEBUG, logger="laneway"):
        default = KafkaSource(kafka_bootstrap, "g", [topic])
        chosen = KafkaSource(kafka_bootstrap, "g", [topic], {"transaction.timeout.ms": 30_000})
        transactions = [default.transaction(), chosen.transaction()]
        timeouts = [t.client_config["transaction.timeout.ms"] for t in transactions]
        for transaction in transactions:
            transaction.close()
        for source in (default, chosen):
            source.close()
    assert timeouts == [10_000, 30_000]
    assert "transaction.timeout.ms" not in chosen.client_config, "a producer setting"
    ignored = [r.getMessage() for r in caplog.records if "producer property" in r.getMessage()]
    assert ignored == [], "librdkafka was not given a producer setting on the consumer"


@pytest.mark.kafka
def test_a_socket_timeout_above_the_transaction_timeout_is_a_config_error(
    kafka_bootstrap: str,
) -> None:
    topic = unique_name("eos-socket")
    create_topic(kafka_bootstrap, topic, 1)
    source = KafkaSource(kafka_bootstrap, "g", [topic], {"socket.timeout.ms": 60_000})
    try:
        with pytest.raises(ConfigError, match=r"socket.timeout.ms.*transaction.timeout.ms=10000"):
            source.transaction()
    finally:
        source.close()
    raised = {"socket.timeout.ms": 60_000, "transaction.timeout.ms": 60_000}
    source = KafkaSource(kafka_bootstrap, "g", [topic], raised)
    transaction = source.transaction()
    transaction.close()
    source.close()


def test_laneway_run_takes_a_transactional_id_from_a_flag_or_the_environment() -> None:
    base = [sys.executable, "-m", "laneway", "run", "app:handle", "--print-config"]
    flag = subprocess.run([*base, "--transactional-id", "pod-7"], capture_output=True, text=True)
    assert flag.returncode == 0, flag.stderr
    [line] = [row for row in flag.stdout.splitlines() if row.startswith("transactional_id ")]
    assert "'pod-7'" in line and "(flag)" in line
    env = subprocess.run(
        base,
        capture_output=True,
        text=True,
        env={"LANEWAY_TRANSACTIONAL_ID": "pod-8", "PATH": "/usr/bin:/bin"},
    )
    assert env.returncode == 0, env.stderr
    [line] = [row for row in env.stdout.splitlines() if row.startswith("transactional_id ")]
    assert "'pod-8'" in line and "(env)" in line
