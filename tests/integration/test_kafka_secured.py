"""A consumer on the broker's secured listener (SASL_SSL, SCRAM-SHA-512, ACLs enforced) with
least-privilege ACLs: it connects, consumes and commits, writes dead letters and results,
and runs exactly-once. A wrong password or an untrusted CA fails at once, the cause first,
the password nowhere."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from kafka_helpers import committed_to_end, create_topic, produce, read_records, unique_name
from secured_kafka import SecuredBroker, grant
from service_runs import SUPPORT, Service

from laneway import AccessDeniedError, Consumer, KafkaSource, Message, Produce

pytestmark = pytest.mark.kafka

USER = "alice"
FAST_GROUP = {"session.timeout.ms": 6000, "heartbeat.interval.ms": 300}


def fed_topic(kafka_bootstrap: str, prefix: str, count: int, partitions: int = 2) -> str:
    topic = unique_name(prefix)
    create_topic(kafka_bootstrap, topic, partitions=partitions)
    produce(kafka_bootstrap, topic, [(f"k{i % 5}", f"v{i}") for i in range(count)])
    return topic


def readable(broker: SecuredBroker, topic: str, group: str) -> None:
    """The least a consumer of ``group`` needs: READ on the topic and on the group."""
    grant(broker, USER, "topic", topic, "READ")
    grant(broker, USER, "group", group, "READ")


def run_secured(
    broker: SecuredBroker,
    topic: str,
    group: str,
    handler: Callable[[Message], object],
    count: int,
    **options: object,
) -> None:
    source = KafkaSource(broker.bootstrap, group, [topic], {**broker.login(USER), **FAST_GROUP})
    consumer = Consumer(source, handler, handle_signals=False, **options)  # type: ignore[arg-type]
    consumer.run(max_messages=count, idle_timeout=30)


def test_a_consumer_with_read_acls_consumes_and_commits_over_sasl_ssl(
    kafka_bootstrap: str, kafka_secured: SecuredBroker
) -> None:
    topic, group = fed_topic(kafka_bootstrap, "secured", 30), unique_name("secured-group")
    readable(kafka_secured, topic, group)
    handled: list[bytes | None] = []

    run_secured(kafka_secured, topic, group, lambda m: handled.append(m.value), 30)

    assert sorted(handled, key=str) == sorted((f"v{i}".encode() for i in range(30)), key=str)
    assert committed_to_end(kafka_bootstrap, group, topic, 30)


def test_dead_letters_go_to_a_topic_the_consumer_may_create_and_write(
    kafka_bootstrap: str, kafka_secured: SecuredBroker
) -> None:
    topic, group = fed_topic(kafka_bootstrap, "secured-dlq", 6), unique_name("secured-group")
    dead_letters = f"{topic}.dlq"
    readable(kafka_secured, topic, group)
    # Creating the dead-letter topic: CREATE and WRITE on it; DESCRIBE_CONFIGS on the
    # input topic lets laneway copy its max.message.bytes.
    grant(kafka_secured, USER, "topic", dead_letters, "CREATE", "WRITE")
    grant(kafka_secured, USER, "topic", topic, "DESCRIBE_CONFIGS")

    def handle(message: Message) -> None:
        if message.value in (b"v1", b"v4"):
            raise ValueError("bad record")

    run_secured(kafka_secured, topic, group, handle, 6, max_retries=0)

    letters = read_records(kafka_bootstrap, dead_letters, 2)
    assert sorted(r.value or b"" for r in letters) == [b"v1", b"v4"]
    assert committed_to_end(kafka_bootstrap, group, topic, 6)


def test_results_go_to_a_topic_the_consumer_may_write(
    kafka_bootstrap: str, kafka_secured: SecuredBroker
) -> None:
    topic, group = fed_topic(kafka_bootstrap, "secured-in", 20), unique_name("secured-group")
    results = unique_name("secured-out")
    create_topic(kafka_bootstrap, results, partitions=1)
    readable(kafka_secured, topic, group)
    grant(kafka_secured, USER, "topic", results, "WRITE")

    run_secured(kafka_secured, topic, group, lambda m: Produce(results, m.value, m.key), 20)

    written = read_records(kafka_bootstrap, results, 20)
    assert sorted(r.value or b"" for r in written) == sorted(f"v{i}".encode() for i in range(20))
    assert committed_to_end(kafka_bootstrap, group, topic, 20)


def test_exactly_once_with_a_transactional_id_acl(
    kafka_bootstrap: str, kafka_secured: SecuredBroker
) -> None:
    topic, group = fed_topic(kafka_bootstrap, "secured-eos", 20), unique_name("secured-group")
    results = unique_name("secured-eos-out")
    create_topic(kafka_bootstrap, results, partitions=1)
    readable(kafka_secured, topic, group)
    grant(kafka_secured, USER, "topic", results, "WRITE")
    # laneway's transactional ids start with laneway-<group>-: one prefixed ACL covers
    # every member (and every restart) of the group.
    grant(kafka_secured, USER, "transactional id", f"laneway-{group}-", "WRITE", prefixed=True)

    run_secured(
        kafka_secured,
        topic,
        group,
        lambda m: Produce(results, m.value, m.key),
        20,
        exactly_once=True,
    )

    written = read_records(kafka_bootstrap, results, 20)  # read_committed
    assert sorted(r.value or b"" for r in written) == sorted(f"v{i}".encode() for i in range(20))
    assert committed_to_end(kafka_bootstrap, group, topic, 20)


def refused_at_start(
    broker: SecuredBroker, settings: dict[str, object], caplog: pytest.LogCaptureFixture
) -> tuple[AccessDeniedError, float]:
    """Run a consumer that logs in with ``settings``; the error and how long it took."""
    source = KafkaSource(
        broker.bootstrap, unique_name("g"), ["orders"], settings, connect_timeout=30.0
    )
    consumer = Consumer(source, lambda m: None, handle_signals=False)
    began = time.monotonic()
    with (
        caplog.at_level(logging.DEBUG, logger="laneway"),
        pytest.raises(AccessDeniedError) as raised,
    ):
        consumer.run(idle_timeout=5)
    return raised.value, time.monotonic() - began


def test_a_wrong_password_fails_at_once_with_the_cause_first(
    kafka_secured: SecuredBroker, caplog: pytest.LogCaptureFixture
) -> None:
    wrong = "wrong-" + kafka_secured.users[USER]
    error, took = refused_at_start(kafka_secured, kafka_secured.login(USER, wrong), caplog)

    # connect_timeout is 30 s: this is librdkafka's first refused login, not the timeout.
    assert took < 5.0
    text = str(error)
    assert text.startswith(
        "authentication failed: SASL SCRAM-SHA-512 as 'alice' was refused "
        "(wrong username or password?)"
    ), text
    assert "bootstrap_servers" not in text
    logged = "\n".join(record.getMessage() for record in caplog.records)
    for password in (wrong, kafka_secured.users[USER]):
        assert password not in text and password not in logged


def test_an_untrusted_ca_fails_at_once_naming_the_ca_file(
    kafka_secured: SecuredBroker, caplog: pytest.LogCaptureFixture
) -> None:
    settings = kafka_secured.login(USER, ca_location=kafka_secured.untrusted_ca)
    error, took = refused_at_start(kafka_secured, settings, caplog)

    assert took < 5.0
    assert str(error).startswith(
        "TLS: the broker's certificate is not trusted by "
        f"ssl.ca.location={kafka_secured.untrusted_ca} ("
    ), str(error)


def test_laneway_run_exits_denied_for_a_wrong_password(
    tmp_path: Path, kafka_secured: SecuredBroker
) -> None:
    wrong = "wrong-" + kafka_secured.users[USER]
    config = tmp_path / "laneway.toml"
    config.write_text(
        "[kafka]\n"
        '"security.protocol" = "SASL_SSL"\n'
        f'"sasl.mechanism" = "{kafka_secured.mechanism}"\n'
        f'"sasl.username" = "{USER}"\n'
        f'"sasl.password" = "{wrong}"\n'
        f'"ssl.ca.location" = "{kafka_secured.ca_location}"\n'
    )
    service = Service(tmp_path, "service_app:handle", [SUPPORT], {"SERVICE_RECORD_DIR": "."})
    began = time.monotonic()
    try:
        code, output = service.run(
            "--bootstrap-servers", kafka_secured.bootstrap, "--group", unique_name("g"),
            "--topic", "orders", "--config", str(config), "--connect-timeout", "30",
        )  # fmt: skip
    finally:
        service.close()

    assert code == 6, output  # exits.DENIED
    assert time.monotonic() - began < 15.0
    assert "laneway run: error: authentication failed: SASL SCRAM-SHA-512" in output
    assert wrong not in output and kafka_secured.users[USER] not in output
