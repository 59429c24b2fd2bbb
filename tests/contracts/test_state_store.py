"""The state store's contract, on the embedded log and on a real Kafka broker.

What must hold for ``Consumer(..., state=StateStore(dir, changelog=T))``: every engine (and
batch handlers) sees each key's state as the sum of that key's earlier messages; the
changelog (compacted, co-partitioned, created when missing) has every key's latest state;
a restart restores from the state files' checkpoint, a missing or foreign file by a full
restore, and a replayed message already in the state is not applied again; results are
written as well; bad settings are ConfigErrors naming what is wrong.
"""

from __future__ import annotations

import logging
import shutil
from collections import Counter
from pathlib import Path
from typing import Any

import kafka_helpers
import pytest
import state_handlers
from changelogs import changelog_state, read_all
from chaos_harness import run_bounded
from topics import SOURCES, KafkaTopic, LogTopic

import laneway

PARTITIONS = 4
KEYS = 30


def inputs(count: int, start: int = 0) -> list[tuple[bytes, bytes]]:
    return [(f"k{i % KEYS}".encode(), b"1") for i in range(start, start + count)]


def expected(records: list[tuple[bytes, bytes]]) -> Counter[bytes]:
    return Counter(key for key, _ in records)


def consume(topic: LogTopic, store: laneway.StateStore, count: int, **options: Any) -> Any:
    engine = options.pop("engine", "thread")
    batched = "batch_size" in options
    handler = options.pop("handler", state_handlers.HANDLERS[engine, batched])
    consumer = laneway.Consumer(
        topic.source(options.pop("group", "counters")),
        handler,
        state=store,
        engine=engine,
        concurrency=2 if engine == "process" else (None if engine == "sync" else 8),
        handle_signals=False,
        commit_interval=0.2,
        **options,
    )
    return run_bounded(consumer, count, limit=90.0)


@pytest.mark.parametrize("kind", SOURCES)
@pytest.mark.parametrize("engine", ["sync", "thread", "async", "process"])
@pytest.mark.parametrize("batched", [False, True], ids=["single", "batch"])
def test_every_engine_counts_exactly(
    make_topic: Any, kind: str, engine: str, batched: bool, tmp_path: Path
) -> None:
    topic = make_topic(kind, PARTITIONS)
    records = inputs(600)
    topic.produce(records)
    changelog = f"{topic.name}.counts"
    store = laneway.StateStore(tmp_path, changelog=changelog)
    options = {"batch_size": 16, "batch_wait": 0.01} if batched else {}
    consume(topic, store, len(records), engine=engine, **options)
    assert changelog_state(topic, changelog) == expected(records)


BACKENDS = ["sqlite", "lmdb"]
"""The state file backends (laneway.state.files): the file tests run on each."""


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("kind", SOURCES)
def test_a_restart_restores_from_the_checkpoint(
    make_topic: Any, kind: str, backend: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    topic = make_topic(kind, PARTITIONS)
    first = inputs(400)
    topic.produce(first)
    changelog = f"{topic.name}.counts"
    store = laneway.StateStore(tmp_path, changelog=changelog, backend=backend)
    consume(topic, store, len(first), engine="sync")
    files = sorted(tmp_path.rglob(f"*.{backend}"))
    assert len(files) == PARTITIONS
    second = inputs(200, start=400)
    topic.produce(second)
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="laneway.state"):
        consume(topic, store, len(second), engine="thread")
    assert "full restore" not in caplog.text
    assert "from checkpoint" in caplog.text
    assert changelog_state(topic, changelog) == expected(first + second)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("kind", SOURCES)
def test_a_missing_or_foreign_file_restores_in_full(
    make_topic: Any, kind: str, backend: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    topic = make_topic(kind, PARTITIONS)
    first = inputs(300)
    topic.produce(first)
    changelog = f"{topic.name}.counts"
    store = laneway.StateStore(tmp_path / "a", changelog=changelog, backend=backend)
    consume(topic, store, len(first))
    # Partition 1's file replaced by partition 0's (a volume mixed up), partition 2's gone.
    folder = tmp_path / "a" / "counters" / changelog
    for suffix in ("", "-wal", "-shm", "-lock"):
        (folder / f"1.{backend}{suffix}").unlink(missing_ok=True)
        (folder / f"2.{backend}{suffix}").unlink(missing_ok=True)
    shutil.copy(folder / f"0.{backend}", folder / f"1.{backend}")
    second = inputs(120, start=300)
    topic.produce(second)
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="laneway.state"):
        consume(topic, store, len(second))
    assert caplog.text.count("full restore") == 2
    assert "its file is for partition '0', not '1'" in caplog.text
    assert "it has no state file yet" in caplog.text
    assert changelog_state(topic, changelog) == expected(first + second)


@pytest.mark.parametrize("kind", SOURCES)
def test_a_replayed_message_is_not_applied_again(
    make_topic: Any, kind: str, tmp_path: Path
) -> None:
    """A second group on the same changelog reads inputs the first one applied: the state
    records their offsets, so none is counted twice."""
    topic = make_topic(kind, PARTITIONS)
    records = inputs(300)
    changelog = f"{topic.name}.counts"
    replaying = topic.source("replay")  # subscribed now: the embedded log keeps the inputs
    topic.produce(records)
    consume(topic, laneway.StateStore(tmp_path / "a", changelog=changelog), len(records))
    consumer = laneway.Consumer(
        replaying,
        state_handlers.count,
        state=laneway.StateStore(tmp_path / "b", changelog=changelog),
        engine="thread",
        handle_signals=False,
    )
    stats = run_bounded(consumer, len(records), limit=90.0)
    assert stats.processed == len(records)
    assert changelog_state(topic, changelog) == expected(records)


@pytest.mark.parametrize("kind", SOURCES)
@pytest.mark.parametrize("exactly_once", [False, True], ids=["at-least-once", "exactly-once"])
def test_results_and_state_are_both_written(
    make_topic: Any, kind: str, exactly_once: bool, tmp_path: Path
) -> None:
    topic = make_topic(kind, PARTITIONS)
    results = f"{topic.name}.results"
    topic.create(results, PARTITIONS)
    records = inputs(200)
    topic.produce(records)
    changelog = f"{topic.name}.counts"

    def count_and_report(message: laneway.Message, state: laneway.State[int]) -> laneway.Produce:
        state.value = (state.value or 0) + 1
        return laneway.Produce(results, str(state.value).encode(), message.key)

    consume(
        topic,
        laneway.StateStore(tmp_path, changelog=changelog),
        len(records),
        handler=count_and_report,
        exactly_once=exactly_once,
    )
    assert changelog_state(topic, changelog) == expected(records)
    written: dict[bytes, list[int]] = {}
    for key, value, _ in read_all(topic, results):
        assert key is not None and value is not None
        written.setdefault(key, []).append(int(value))
    assert {k: v[-1] for k, v in written.items()} == expected(records)
    assert all(v == list(range(1, len(v) + 1)) for v in written.values())


@pytest.mark.parametrize("kind", SOURCES)
def test_deleted_state_is_a_tombstone(make_topic: Any, kind: str, tmp_path: Path) -> None:
    topic = make_topic(kind, 1)
    records = [(b"a", b"2"), (b"b", b"1"), (b"a", b"-2"), (b"b", b"1")]
    topic.produce(records)
    changelog = f"{topic.name}.counts"
    store = laneway.StateStore(tmp_path, changelog=changelog)
    consume(topic, store, len(records), handler=state_handlers.delete_at_zero)
    assert changelog_state(topic, changelog) == {b"b": 2}
    read = read_all(topic, changelog)
    assert [(k, v) for k, v, _ in read if k == b"a"][-1] == (b"a", None)


@pytest.mark.parametrize("kind", SOURCES)
def test_a_changelog_with_another_partition_count_is_refused(
    make_topic: Any, kind: str, tmp_path: Path
) -> None:
    topic = make_topic(kind, PARTITIONS)
    changelog = f"{topic.name}.counts"
    topic.create(changelog, PARTITIONS + 1)
    consumer = laneway.Consumer(
        topic.source("g"),
        state_handlers.count,
        state=laneway.StateStore(tmp_path, changelog=changelog),
        handle_signals=False,
    )
    with pytest.raises(laneway.ConfigError, match=f"{changelog}.*{PARTITIONS + 1} partitions"):
        consumer.run(idle_timeout=1.0)


@pytest.mark.kafka
def test_a_changelog_that_is_not_compacted_is_refused(kafka_bootstrap: str, tmp_path: Path) -> None:
    topic = KafkaTopic(kafka_bootstrap, 2)
    changelog = f"{topic.name}.counts"
    topic.create(changelog, 2)  # cleanup.policy=delete, the broker's default
    kafka_helpers.produce(kafka_bootstrap, changelog, [(b"k", b"1")])  # it holds state
    consumer = laneway.Consumer(
        topic.source("g"),
        state_handlers.count,
        state=laneway.StateStore(tmp_path, changelog=changelog),
        handle_signals=False,
    )
    with pytest.raises(
        laneway.ConfigError,
        match=f"{changelog}.*not compacted.*kafka-configs.sh .*--add-config cleanup.policy=compact",
    ):
        consumer.run(idle_timeout=1.0)


@pytest.mark.kafka
def test_an_empty_changelog_of_the_wrong_shape_is_mended(
    kafka_bootstrap: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """What a broker with auto.create.topics.enable=true makes when a client asks for the
    changelog before the store creates it: one partition, cleanup.policy=delete."""
    from confluent_kafka.admin import AdminClient, ConfigResource

    topic = KafkaTopic(kafka_bootstrap, PARTITIONS)
    changelog = f"{topic.name}.counts"
    topic.create(changelog, 1)
    topic.produce([(b"k%d" % i, b"1") for i in range(10)])
    consumer = laneway.Consumer(
        topic.source("g"),
        state_handlers.count,
        state=laneway.StateStore(tmp_path, changelog=changelog),
        handle_signals=False,
    )
    with caplog.at_level(logging.WARNING, logger="laneway.state.changelog"):
        assert consumer.run(max_messages=10).processed == 10
    mended = [r.getMessage() for r in caplog.records if "mended it" in r.getMessage()]
    assert len(mended) == 1 and f"has 1 partitions instead of its input's {PARTITIONS}" in mended[0]
    admin = AdminClient({"bootstrap.servers": kafka_bootstrap})
    assert len(admin.list_topics(changelog, timeout=10).topics[changelog].partitions) == PARTITIONS
    resource = ConfigResource("topic", changelog)
    policy = admin.describe_configs([resource])[resource].result(10)["cleanup.policy"].value
    assert policy == "compact"
    assert changelog_state(topic, changelog) == {b"k%d" % i: 1 for i in range(10)}


@pytest.mark.kafka
def test_a_changelog_with_state_and_too_few_partitions_is_refused_with_the_command(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    topic = KafkaTopic(kafka_bootstrap, PARTITIONS)
    changelog = f"{topic.name}.counts"
    topic.create(changelog, 1)
    kafka_helpers.produce(kafka_bootstrap, changelog, [(b"k", b"1")])
    consumer = laneway.Consumer(
        topic.source("g"),
        state_handlers.count,
        state=laneway.StateStore(tmp_path, changelog=changelog),
        handle_signals=False,
    )
    with pytest.raises(
        laneway.ConfigError,
        match=f"kafka-topics.sh --bootstrap-server {kafka_bootstrap} --alter --topic "
        f"{changelog} --partitions {PARTITIONS}",
    ):
        consumer.run(idle_timeout=1.0)


@pytest.mark.kafka
def test_a_missing_changelog_is_created_compacted(kafka_bootstrap: str, tmp_path: Path) -> None:
    from confluent_kafka.admin import AdminClient, ConfigResource

    topic = KafkaTopic(kafka_bootstrap, 3)
    topic.produce(inputs(30))
    changelog = f"{topic.name}.counts"
    consume(topic, laneway.StateStore(tmp_path, changelog=changelog), 30)
    admin = AdminClient({"bootstrap.servers": kafka_bootstrap})
    assert len(admin.list_topics(changelog, timeout=10).topics[changelog].partitions) == 3
    resource = ConfigResource("topic", changelog)
    config = admin.describe_configs([resource])[resource].result(10)
    assert config["cleanup.policy"].value == "compact"


def test_bad_settings_are_config_errors(tmp_path: Path) -> None:
    log = laneway.EmbeddedLog()
    log.create_topic("t", partitions=1)
    store = laneway.StateStore(tmp_path, changelog="t.state")
    with pytest.raises(laneway.ConfigError, match="ordering='unordered'"):
        laneway.Consumer(log.subscribe(["t"], "g"), state_handlers.count, state=store,
                         ordering="unordered")  # fmt: skip
    with pytest.raises(laneway.ConfigError, match="null_keys='unordered'"):
        laneway.Consumer(log.subscribe(["t"], "g"), state_handlers.count, state=store,
                         null_keys="unordered")  # fmt: skip
    with pytest.raises(laneway.ConfigError, match=r"\(message, state\)"):
        laneway.Consumer(log.subscribe(["t"], "g"), lambda m: None, state=store)
    with pytest.raises(laneway.ConfigError, match=r"state=.*StateStore"):
        laneway.Consumer(log.subscribe(["t"], "g"), state_handlers.count, state="./state")
    with pytest.raises(laneway.ConfigError, match="StateStore changelog"):
        laneway.StateStore(tmp_path, changelog="bad name")
    with pytest.raises(laneway.ConfigError, match=r"StateStore backend='rocks' .*'lmdb'"):
        laneway.StateStore(tmp_path, changelog="t.state", backend="rocks")
    log.create_topic("u", partitions=1)
    consumer = laneway.Consumer(
        log.subscribe(["t", "u"], "g"), state_handlers.count, state=store, handle_signals=False
    )
    with pytest.raises(laneway.ConfigError, match="exactly one topic"):
        consumer.run(idle_timeout=0.5)
