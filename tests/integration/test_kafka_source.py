"""KafkaSource against a real broker, plus argument validation (which needs no broker).

What every source promises (fields and order, pause, unread, commits seeding the next
owner, revocation commits, its producer) is tested for Kafka and the embedded log alike
in ``test_source_contract.py``; this file holds what only Kafka has (group protocols,
the metadata size limit, fencing, librdkafka settings)."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence

import pytest
from kafka_helpers import committed_offsets, create_topic, end_offsets, produce, unique_name

import laneway
from laneway.errors import ConfigError, SourceError
from laneway.sources.kafka.client_config import build_settings
from laneway.sources.kafka.source import KafkaSource
from laneway.types import CommitPosition, Message, PartitionId

# session.timeout.ms must be >= the broker's group.min.session.timeout.ms (6000 by default);
# a short heartbeat makes members notice a rebalance quickly.
FAST_GROUP = {"session.timeout.ms": 6000, "heartbeat.interval.ms": 300}
WAIT_S = 30.0


class Recorder:
    """A RebalanceListener that records every call; ``on_revoke`` may run an action."""

    def __init__(self) -> None:
        self.assigned: list[dict[PartitionId, CommitPosition | None]] = []
        self.revoked: list[list[PartitionId]] = []
        self.lost: list[list[PartitionId]] = []
        self.on_revoke_action: Callable[[Sequence[PartitionId]], None] | None = None

    def on_assigned(self, positions: Mapping[PartitionId, CommitPosition | None]) -> None:
        self.assigned.append(dict(positions))

    def on_revoked(self, partitions: Sequence[PartitionId]) -> None:
        self.revoked.append(list(partitions))
        if self.on_revoke_action is not None:
            self.on_revoke_action(partitions)

    def on_lost(self, partitions: Sequence[PartitionId]) -> None:
        self.lost.append(list(partitions))


def open_source(
    bootstrap: str, group: str, topic: str, **config: object
) -> tuple[KafkaSource, Recorder]:
    """A source of ``group`` on ``topic``, opened with a recording listener.

    KIP-848 groups (``group.protocol=consumer``) take their timeouts from the broker.
    """
    timeouts = {} if config.get("group.protocol") == "consumer" else FAST_GROUP
    source = KafkaSource(bootstrap, group, [topic], {**timeouts, **config})
    recorder = Recorder()
    source.open(recorder)
    return source, recorder


def poll_until(
    sources: Iterable[KafkaSource],
    done: Callable[[], bool],
    into: dict[str, list[Message]] | None = None,
    timeout_s: float = WAIT_S,
) -> None:
    """Poll every source in turn until ``done()``; bounded in time and iterations."""
    pollers = list(sources)
    deadline = time.monotonic() + timeout_s
    for _ in range(int(timeout_s / 0.05) + 1):
        if done():
            return
        if time.monotonic() > deadline:
            break
        for source in pollers:
            batch = source.poll(500, 0.05)
            if into is not None:
                into.setdefault(source.name, []).extend(batch)
    assert done(), f"condition not reached within {timeout_s}s"


def poll_for(source: KafkaSource, seconds: float) -> list[Message]:
    got: list[Message] = []
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        got.extend(source.poll(500, 0.05))
    return got


def collect(source: KafkaSource, count: int) -> list[Message]:
    got: dict[str, list[Message]] = {}
    poll_until([source], lambda: len(got.get(source.name, [])) >= count, got)
    return got[source.name]


# Each way of joining a group: incremental assign (default), eager assign, broker-side (KIP-848).
GROUP_PROTOCOLS = [
    pytest.param({}, id="cooperative-sticky"),
    pytest.param({"partition.assignment.strategy": "range"}, id="range"),
    pytest.param({"group.protocol": "consumer"}, id="kip848"),
]


@pytest.mark.kafka
@pytest.mark.parametrize("protocol", GROUP_PROTOCOLS)
def test_committed_positions_are_durable_and_seed_the_next_owner(
    kafka_bootstrap: str, protocol: dict[str, object]
) -> None:
    topic, group = unique_name("src-commit"), unique_name("g")
    create_topic(kafka_bootstrap, topic, partitions=2)
    placed = produce(kafka_bootstrap, topic, [(f"k{i}".encode(), b"v") for i in range(40)])
    ends = end_offsets(kafka_bootstrap, topic)
    assert all(ends[p] >= 3 for p in (0, 1)), f"keys did not spread over partitions: {ends}"

    first, _ = open_source(kafka_bootstrap, group, topic, **protocol)
    try:
        collect(first, len(placed))
        first.commit(
            {
                (topic, 0): CommitPosition(2, "finished:0-1;5"),
                (topic, 1): CommitPosition(1, "p1 ✓"),
            }
        )
    finally:
        first.close()
    assert committed_offsets(kafka_bootstrap, group, topic) == {
        0: (2, "finished:0-1;5"),
        1: (1, "p1 ✓"),
    }

    second, recorder = open_source(kafka_bootstrap, group, topic, **protocol)
    try:
        got = collect(second, ends[0] - 2 + ends[1] - 1)
        assert recorder.assigned == [
            {(topic, 0): CommitPosition(2, "finished:0-1;5"), (topic, 1): CommitPosition(1, "p1 ✓")}
        ]
        assert min(m.offset for m in got if m.partition == 0) == 2
        assert min(m.offset for m in got if m.partition == 1) == 1
        assert len(got) == ends[0] - 2 + ends[1] - 1
    finally:
        second.close()


@pytest.mark.kafka
def test_a_partition_that_comes_back_after_a_rebalance_starts_unpaused(
    kafka_bootstrap: str,
) -> None:
    topic, group = unique_name("src-pause-rebalance"), unique_name("g")
    create_topic(kafka_bootstrap, topic, partitions=2)
    first, first_rec = open_source(kafka_bootstrap, group, topic)
    second: KafkaSource | None = None
    try:
        poll_until([first], lambda: len(first.assignment) == 2)
        first.pause(first.assignment)
        placed = produce(kafka_bootstrap, topic, [(f"k{i}".encode(), b"v") for i in range(40)])
        per_partition = {p: sum(1 for q, _ in placed if q == p) for p in (0, 1)}
        assert per_partition[0] > 0 and per_partition[1] > 0

        second, _ = open_source(kafka_bootstrap, group, topic)
        taken: dict[str, list[Message]] = {}
        poll_until(
            [first, second],
            lambda: len(first.assignment) == 1 and len(second.assignment) == 1,
            taken,
        )
        assert taken.get(first.name, []) == []
        (moved,) = {p for batch in first_rec.revoked for p in batch}
        second.close()  # leaves without committing: the moved partition is re-read from 0

        back: dict[str, list[Message]] = {}
        poll_until([first], lambda: len(back.get(first.name, [])) >= per_partition[moved[1]], back)
        back[first.name] += poll_for(first, 1.0)
        # The returning partition starts unpaused; the one never given up stays paused.
        assert {m.partition for m in back[first.name]} == {moved[1]}
        assert [m.offset for m in back[first.name]] == list(range(per_partition[moved[1]]))
    finally:
        first.close()
        if second is not None:
            second.close()


@pytest.mark.kafka
def test_commit_failures_raise_source_error(kafka_bootstrap: str) -> None:
    topic = unique_name("src-commit-fail")
    create_topic(kafka_bootstrap, topic, partitions=1)
    source, recorder = open_source(kafka_bootstrap, unique_name("g"), topic)
    try:
        poll_until([source], lambda: bool(recorder.assigned))
        with pytest.raises(SourceError, match=r"OFFSET_METADATA_TOO_LARGE.*offset\.metadata"):
            source.commit({(topic, 0): CommitPosition(0, "x" * 5000)})
        with pytest.raises(SourceError, match="not owned"):
            source.commit({(topic, 1): CommitPosition(0)})
        source.commit({(topic, 0): CommitPosition(0, "fits")})
    finally:
        source.close()
        source.close()  # idempotent
    with pytest.raises(SourceError, match="closed"):
        source.poll(10, 0.0)


@pytest.mark.kafka
def test_a_fenced_static_member_loses_its_partitions_and_fails(kafka_bootstrap: str) -> None:
    topic, group = unique_name("src-fenced"), unique_name("g")
    create_topic(kafka_bootstrap, topic, partitions=2)
    static = {"group.instance.id": "the-same-instance"}
    first, first_rec = open_source(kafka_bootstrap, group, topic, **static)
    second: KafkaSource | None = None
    try:
        poll_until([first], lambda: len(first.assignment) == 2)
        second, _ = open_source(kafka_bootstrap, group, topic, **static)
        with pytest.raises(SourceError, match=r"fatal consumer error.*fenced"):
            poll_until([first, second], lambda: False, timeout_s=15.0)
        assert first_rec.lost == [sorted(first_rec.assigned[0])]
        assert first.assignment == frozenset()
        with pytest.raises(SourceError, match="not owned"):
            first.commit({(topic, 0): CommitPosition(0)})
    finally:
        first.close()
        if second is not None:
            second.close()


def test_name_and_usage_errors() -> None:
    source = laneway.KafkaSource("127.0.0.1:1", "billing", ["orders"])
    try:
        assert source.name == "kafka:127.0.0.1:1/billing"
        with pytest.raises(SourceError, match="open"):
            source.poll(10, 0.0)
    finally:
        source.close()


@pytest.mark.parametrize(
    ("kwargs", "named"),
    [
        ({"bootstrap_servers": ""}, "bootstrap_servers"),
        ({"bootstrap_servers": None}, "bootstrap_servers"),
        ({"group": " "}, "group"),
        ({"topics": []}, "topics"),
        ({"topics": "orders"}, "topics"),
        ({"topics": ["orders", 7]}, "topics"),
        ({"config": [("fetch.min.bytes", 1)]}, "config"),
        ({"config": {1: "x"}}, "config key 1"),
        ({"config": {"fetch.min.bytes": None}}, "fetch.min.bytes"),
        ({"config": {"enable.auto.commit": True}}, "enable.auto.commit"),
        ({"config": {"enable.auto.commit": "true"}}, "enable.auto.commit"),
        ({"config": {"enable.auto.offset.store": True}}, "enable.auto.offset.store"),
        ({"config": {"group.id": "other"}}, "group.id"),
        ({"config": {"bootstrap.servers": "x:1"}}, "bootstrap.servers"),
        ({"config": {"no.such.setting": 1}}, "no.such.setting"),
        ({"config": {"auto.offset.reset": "sideways"}}, "auto.offset.reset"),
        ({"connect_timeout": 0}, "connect_timeout"),
        ({"wait_for_topics": "yes"}, "wait_for_topics"),
    ],
)
def test_invalid_options_raise_config_error_naming_them(
    kwargs: dict[str, object], named: str
) -> None:
    arguments: dict[str, object] = {
        "bootstrap_servers": "127.0.0.1:1",
        "group": "billing",
        "topics": ["orders"],
        "config": {},
    }
    arguments.update(kwargs)
    with pytest.raises(ConfigError, match=named.replace(".", r"\.")):
        KafkaSource(**arguments)  # type: ignore[arg-type]


def test_auto_commit_explicitly_off_is_accepted() -> None:
    source = KafkaSource("127.0.0.1:1", "billing", ["orders"], {"enable.auto.commit": "false"})
    source.close()


def test_settings_force_manual_commits_and_choose_defaults() -> None:
    settings = build_settings(" 127.0.0.1:9092 ", "billing", ["orders", "orders"], None)
    config = settings.consumer_config
    assert (settings.bootstrap_servers, settings.topics) == ("127.0.0.1:9092", ("orders",))
    assert config["enable.auto.commit"] is False
    assert config["enable.auto.offset.store"] is False
    assert config["auto.offset.reset"] == "earliest"
    assert config["partition.assignment.strategy"] == "cooperative-sticky"
    assert config["fetch.queue.backoff.ms"] == 50
    assert config["fetch.wait.max.ms"] == 20
    assert (config["bootstrap.servers"], config["group.id"]) == ("127.0.0.1:9092", "billing")
    assert settings.incremental


def test_settings_let_the_user_override_defaults() -> None:
    eager = build_settings(
        "b:1", "g", ["t"], {"partition.assignment.strategy": "range", "auto.offset.reset": "latest"}
    )
    assert eager.consumer_config["partition.assignment.strategy"] == "range"
    assert eager.consumer_config["auto.offset.reset"] == "latest"
    assert not eager.incremental
    # KIP-848 assigns on the broker and rejects partition.assignment.strategy.
    kip848 = build_settings("b:1", "g", ["t"], {"group.protocol": "consumer"})
    assert "partition.assignment.strategy" not in kip848.consumer_config
    assert kip848.incremental


def test_an_unreachable_broker_fails_within_the_connect_timeout_naming_it(
    caplog: pytest.LogCaptureFixture,
) -> None:
    source = laneway.KafkaSource("127.0.0.1:1", "g", ["orders"], connect_timeout=1.0)
    consumer = laneway.Consumer(source, lambda m: None, handle_signals=False)
    began = time.monotonic()
    expected = (
        r"cannot reach the Kafka cluster at 127\.0\.0\.1:1: "
        r"no broker answered within connect_timeout=1 s \(.*Connection refused"
    )
    with (
        caplog.at_level(logging.DEBUG, logger="laneway"),
        pytest.raises(SourceError, match=expected),
    ):
        consumer.run(idle_timeout=5)
    assert time.monotonic() - began < 5.0
    lines = [r for r in caplog.records if r.name == "laneway.librdkafka"]
    assert lines, "librdkafka's lines go through the laneway.librdkafka logger"
    assert len({r.getMessage() for r in lines}) == len(lines), "repeats are held back"


def test_a_broker_name_that_does_not_resolve_fails_at_once() -> None:
    source = laneway.KafkaSource("no-such-host.invalid:9092", "g", ["orders"])
    began = time.monotonic()
    with pytest.raises(
        SourceError, match=r"no-such-host\.invalid:9092: the broker name does not resolve"
    ):
        laneway.Consumer(source, lambda m: None, handle_signals=False).run(idle_timeout=5)
    assert time.monotonic() - began < 2.0


@pytest.mark.kafka
def test_a_topic_that_does_not_exist_is_an_unknown_topic_error(kafka_bootstrap: str) -> None:
    missing = unique_name("missing")
    source = laneway.KafkaSource(kafka_bootstrap, unique_name("g"), [missing])
    with pytest.raises(
        laneway.UnknownTopicError, match=f"unknown topic '{missing}'.*wait_for_topics=True"
    ):
        laneway.Consumer(source, lambda m: None, handle_signals=False).run(idle_timeout=5)
    existing = unique_name("orders")
    create_topic(kafka_bootstrap, existing, 1)
    misspelt = existing[:-1]  # the last character left out
    source = laneway.KafkaSource(kafka_bootstrap, unique_name("g"), [misspelt])
    with pytest.raises(laneway.UnknownTopicError) as raised:
        laneway.Consumer(source, lambda m: None, handle_signals=False).run(idle_timeout=5)
    assert f"unknown topic '{misspelt}' (did you mean '{existing}'?)" in str(raised.value)


@pytest.mark.kafka
def test_wait_for_topics_consumes_a_topic_created_later(kafka_bootstrap: str) -> None:
    topic = unique_name("later")
    source = laneway.KafkaSource(
        kafka_bootstrap,
        unique_name("g"),
        [topic],
        {**FAST_GROUP, "topic.metadata.refresh.interval.ms": 1000},
        wait_for_topics=True,
    )
    consumer = laneway.Consumer(source, lambda m: None, handle_signals=False)
    result: list[laneway.ConsumerStats] = []
    runner = threading.Thread(target=lambda: result.append(consumer.run(max_messages=5)))
    runner.start()
    time.sleep(1.0)
    create_topic(kafka_bootstrap, topic, partitions=1)
    produce(kafka_bootstrap, topic, [(b"k", b"v")] * 5)
    runner.join(30)
    if runner.is_alive():
        consumer.stop()
        runner.join(10)
    assert result and result[0].processed == 5
