"""A missing ACL is a permanent error: the consumer turns not ready at once, one ERROR
names the ACL to grant, and the run ends with AccessDeniedError (``laneway run``: exit 6)
within a bounded time. On the broker's secured listener, one denial per test: the group,
reading a topic, writing a dead letter or a result, the transactional id."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient
from kafka_helpers import committed_offsets, create_topic, produce, share_source, unique_name
from secured_kafka import SecuredBroker, grant
from service_runs import SUPPORT, Service

from laneway import (
    AccessDeniedError,
    Consumer,
    Health,
    KafkaShareSource,
    KafkaSource,
    Message,
    Produce,
)

pytestmark = pytest.mark.kafka

USER = "alice"
FAST_GROUP = {"session.timeout.ms": 6000, "heartbeat.interval.ms": 300}
SHARE_GROUP_CONFIGS = ("DESCRIBE_CONFIGS", "ALTER_CONFIGS")
"""What a share member asks of its group before joining: its configs read (the record
lock), and set (``start_at``, ``group_config``)."""
DRAIN_TIMEOUT_S = 30.0
BOUND_S = 8.0
"""The run ends this soon after it starts: the refusal comes within a second of the first
request it concerns; then the consumer waits only for handlers still running (never for
``drain_timeout`` on writes that cannot succeed) and closes."""


@dataclass
class Denied:
    """How a consumer's run ended on a refusal."""

    error: AccessDeniedError
    seconds: float
    errors_logged: list[str]
    warnings_logged: int
    health: list[Health] = field(default_factory=list)


@pytest.fixture
def topic(kafka_bootstrap: str) -> str:
    name = unique_name("denied")
    create_topic(kafka_bootstrap, name, partitions=2)
    produce(kafka_bootstrap, name, [(f"k{i}", f"v{i}") for i in range(10)])
    return name


@pytest.fixture
def group() -> str:
    return unique_name("denied-group")


@pytest.fixture
def denied_run(
    kafka_secured: SecuredBroker, caplog: pytest.LogCaptureFixture
) -> Iterator[Callable[..., Denied]]:
    def run(
        topic: str,
        group: str,
        handler: Callable[..., object],
        share: bool = False,
        **options: object,
    ) -> Denied:
        login = kafka_secured.login(USER)
        source: KafkaSource | KafkaShareSource
        if share:
            source = share_source(kafka_secured.bootstrap, group, [topic], login)
            options.setdefault("ordering", "unordered")
        else:
            source = KafkaSource(kafka_secured.bootstrap, group, [topic], {**login, **FAST_GROUP})
        consumer = Consumer(
            source,
            handler,
            handle_signals=False,
            drain_timeout=DRAIN_TIMEOUT_S,
            **options,  # type: ignore[arg-type]
        )
        seen: list[Health] = []
        done = threading.Event()

        def watch() -> None:
            while not done.is_set():
                seen.append(consumer.health())
                time.sleep(0.02)

        watcher = threading.Thread(target=watch, daemon=True)
        watcher.start()
        began = time.monotonic()
        try:
            with (
                caplog.at_level(logging.INFO, logger="laneway"),
                pytest.raises(AccessDeniedError) as raised,
            ):
                consumer.run(idle_timeout=60)
        finally:
            done.set()
            watcher.join()
        took = time.monotonic() - began
        ours = [r for r in caplog.records if r.name != "laneway.librdkafka"]
        return Denied(
            raised.value,
            took,
            [r.getMessage() for r in ours if r.levelno >= logging.ERROR],
            sum(1 for r in ours if r.levelno == logging.WARNING),
            seen,
        )

    yield run


def reported_once(denied: Denied, expected: str) -> None:
    """The run ended in time with ``expected`` in the error, logged as one ERROR."""
    assert expected in str(denied.error), str(denied.error)
    assert denied.seconds < BOUND_S
    assert [line for line in denied.errors_logged if expected in line] == [
        f"stopping: {denied.error}"
    ], denied.errors_logged
    assert denied.warnings_logged < 10


def test_a_missing_group_acl_ends_the_run_naming_it(
    kafka_secured: SecuredBroker, topic: str, group: str, denied_run: Callable[..., Denied]
) -> None:
    grant(kafka_secured, USER, "topic", topic, "READ")

    denied = denied_run(topic, group, lambda m: None)

    reported_once(
        denied,
        f"the cluster denied User:{USER} READ on group {group!r} (GROUP_AUTHORIZATION_FAILED): "
        f"grant User:{USER} READ on the group: kafka-acls --add --allow-principal User:{USER} "
        f"--operation Read --group {group}",
    )


def test_a_topic_the_consumer_may_see_but_not_read_ends_the_run(
    kafka_bootstrap: str,
    kafka_secured: SecuredBroker,
    topic: str,
    group: str,
    denied_run: Callable[..., Denied],
) -> None:
    grant(kafka_secured, USER, "group", group, "READ")
    grant(kafka_secured, USER, "topic", topic, "DESCRIBE")  # passes the start-up check

    denied = denied_run(topic, group, lambda m: None)

    reported_once(
        denied,
        f"the cluster denied User:{USER} READ on topic {topic!r} (TOPIC_AUTHORIZATION_FAILED)",
    )
    assert committed_offsets(kafka_bootstrap, group, topic) == {}


def test_a_topic_the_consumer_may_not_see_fails_the_start(
    kafka_secured: SecuredBroker, topic: str, group: str
) -> None:
    grant(kafka_secured, USER, "group", group, "READ")
    source = KafkaSource(kafka_secured.bootstrap, group, [topic], kafka_secured.login(USER))
    began = time.monotonic()
    with pytest.raises(AccessDeniedError, match=rf"READ on topic '{topic}' \(TOPIC_AUTHOR"):
        Consumer(source, lambda m: None, handle_signals=False).run(idle_timeout=30)
    assert time.monotonic() - began < 5.0


def fail_some(message: Message) -> None:
    if message.value == b"v3":
        raise ValueError("bad record")


def test_a_dead_letter_topic_the_consumer_may_not_write_ends_the_run(
    kafka_bootstrap: str,
    kafka_secured: SecuredBroker,
    topic: str,
    group: str,
    denied_run: Callable[..., Denied],
) -> None:
    dead_letters = f"{topic}.dlq"
    create_topic(kafka_bootstrap, dead_letters, partitions=2)
    grant(kafka_secured, USER, "group", group, "READ")
    grant(kafka_secured, USER, "topic", topic, "READ")
    grant(kafka_secured, USER, "topic", dead_letters, "DESCRIBE")

    denied = denied_run(topic, group, fail_some, max_retries=0)

    reported_once(
        denied,
        f"the cluster denied User:{USER} WRITE on topic {dead_letters!r} "
        "(TOPIC_AUTHORIZATION_FAILED)",
    )
    # v3's offset is not committed: its partition's commit point stays before it.
    committed = committed_offsets(kafka_bootstrap, group, topic)
    assert sum(offset for offset, _ in committed.values()) < 10
    # Before: the refusal raised again while the shutdown flushed the dead letters, before
    # the source was closed: the member never left its group, and its restart (laneway run
    # exits 6), once the ACL was granted, waited out the session (45 s by default).
    assert group_members(kafka_bootstrap, group) == 0, "the refused member is still in it"


def test_a_dead_letter_topic_the_consumer_may_not_create_ends_the_run(
    kafka_secured: SecuredBroker, topic: str, group: str, denied_run: Callable[..., Denied]
) -> None:
    grant(kafka_secured, USER, "group", group, "READ")
    grant(kafka_secured, USER, "topic", topic, "READ")

    denied = denied_run(topic, group, fail_some, max_retries=0)

    reported_once(denied, f"the cluster denied User:{USER} CREATE on topic '{topic}.dlq'")


def test_a_results_topic_the_consumer_may_not_write_ends_the_run_not_ready_at_once(
    kafka_bootstrap: str,
    kafka_secured: SecuredBroker,
    topic: str,
    group: str,
    denied_run: Callable[..., Denied],
) -> None:
    results = unique_name("denied-out")
    create_topic(kafka_bootstrap, results, partitions=1)
    grant(kafka_secured, USER, "group", group, "READ")
    grant(kafka_secured, USER, "topic", topic, "READ")
    grant(kafka_secured, USER, "topic", results, "DESCRIBE")

    def handle(message: Message) -> Produce | None:
        if message.value == b"v9":
            time.sleep(2.0)  # still running when the write is refused: the drain waits
            return None
        return Produce(results, message.value)

    denied = denied_run(topic, group, handle, engine="thread", concurrency=4)

    expected = f"the cluster denied User:{USER} WRITE on topic {results!r}"
    reported_once(denied, expected)
    draining = [h for h in denied.health if h.live and expected in h.reason]
    assert draining, "not ready, naming the ACL, while the last handler drains"
    assert not any(h.ready for h in draining)


def test_a_missing_transactional_id_acl_ends_the_run_naming_it(
    kafka_bootstrap: str,
    kafka_secured: SecuredBroker,
    topic: str,
    group: str,
    denied_run: Callable[..., Denied],
) -> None:
    results = unique_name("denied-eos-out")
    create_topic(kafka_bootstrap, results, partitions=1)
    grant(kafka_secured, USER, "group", group, "READ")
    grant(kafka_secured, USER, "topic", topic, "READ")
    grant(kafka_secured, USER, "topic", results, "WRITE")

    denied = denied_run(topic, group, lambda m: Produce(results, m.value), exactly_once=True)

    reported_once(
        denied,
        f"the cluster denied User:{USER} WRITE on transactional id 'laneway-{group}-",
    )


@pytest.mark.parametrize(
    ("group_acls", "topic_acl", "expected"),
    [
        (("READ",), "READ", "DESCRIBE_CONFIGS on group {group!r} (GROUP_AUTHORIZATION_FAILED)"),
        (SHARE_GROUP_CONFIGS, "READ", "READ on group {group!r} (GROUP_AUTHORIZATION_FAILED)"),
        (
            ("READ", *SHARE_GROUP_CONFIGS),
            "DESCRIBE",
            "READ on topic {topic!r} (TOPIC_AUTHORIZATION_FAILED)",
        ),
    ],
    ids=["group-configs", "group-read", "topic-read"],
)
def test_a_share_member_missing_an_acl_ends_the_run_naming_it(
    kafka_secured: SecuredBroker,
    topic: str,
    group: str,
    denied_run: Callable[..., Denied],
    group_acls: tuple[str, ...],
    topic_acl: str,
    expected: str,
) -> None:
    grant(kafka_secured, USER, "group", group, *group_acls)
    grant(kafka_secured, USER, "topic", topic, topic_acl)

    denied = denied_run(topic, group, lambda m: None, share=True)

    denial = expected.format(group=group, topic=topic)
    reported_once(denied, f"the cluster denied User:{USER} {denial}: grant User:{USER} ")
    assert "kafka-acls --add --allow-principal" in str(denied.error)


def test_laneway_run_exits_denied_for_a_missing_group_acl(
    tmp_path: Path, kafka_secured: SecuredBroker, topic: str, group: str
) -> None:
    grant(kafka_secured, USER, "topic", topic, "READ")
    config = tmp_path / "laneway.toml"
    settings = kafka_secured.login(USER)
    config.write_text("[kafka]\n" + "".join(f'"{k}" = "{v}"\n' for k, v in settings.items()))
    service = Service(tmp_path, "service_app:handle", [SUPPORT], {"SERVICE_RECORD_DIR": "."})
    try:
        code, output = service.run(
            "--bootstrap-servers", kafka_secured.bootstrap, "--group", group, "--topic", topic,
            "--config", str(config),
        )  # fmt: skip
    finally:
        service.close()

    assert code == 6, output  # exits.DENIED
    assert f"laneway run: error: the cluster denied User:{USER} READ on group {group!r}" in output
    assert settings["sasl.password"] not in output


def group_members(bootstrap: str, group: str) -> int:
    """How many members the group coordinator holds for ``group`` now."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    described = admin.describe_consumer_groups([group])[group].result(timeout=30)
    return len(described.members)
