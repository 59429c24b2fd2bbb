"""No topic laneway writes is auto-created by a broker with Kafka's default
``auto.create.topics.enable=true``: laneway makes its changelog and dead-letter topics
itself, shaped like their input, and a results topic that does not exist is an error naming
it (the record is dead-lettered), never a new one-partition topic."""

from __future__ import annotations

import threading
from collections import Counter
from pathlib import Path

import pytest
from changelogs import latest_counts, read_kafka
from confluent_kafka.admin import AdminClient, ConfigResource
from conftest import CompatBroker
from kafka_helpers import create_topic, produce, unique_name

import laneway

pytestmark = pytest.mark.compat

PARTITIONS = 4


def shape(bootstrap: str, topic: str) -> tuple[int | None, str | None]:
    """The topic's partition count and cleanup.policy (``None``: no such topic)."""
    admin = AdminClient({"bootstrap.servers": bootstrap, "allow.auto.create.topics": False})
    found = admin.list_topics(topic, timeout=10).topics.get(topic)
    if found is None or found.error is not None:
        return None, None
    resource = ConfigResource("topic", topic)
    policy = admin.describe_configs([resource])[resource].result(10)["cleanup.policy"].value
    return len(found.partitions), policy


def count(message: laneway.Message, state: laneway.State[int]) -> None:
    state.value = (state.value or 0) + 1


def test_the_changelog_is_made_like_its_input_and_counts_stay_exact(
    compat_broker: CompatBroker, tmp_path: Path
) -> None:
    bootstrap = compat_broker.bootstrap
    topic, group = unique_name("compat-state"), unique_name("compat-state")
    changelog = f"{topic}.state"
    create_topic(bootstrap, topic, PARTITIONS)
    keys = [b"k%d" % (i % 30) for i in range(300)]
    produce(bootstrap, topic, [(key, b"1") for key in keys])
    for run in range(2):  # a second run restores every partition from the changelog
        if run:
            produce(bootstrap, topic, [(key, b"1") for key in keys])
        store = laneway.StateStore(tmp_path / f"run{run}", changelog=changelog)
        source = laneway.KafkaSource(bootstrap, group, [topic])
        consumer = laneway.Consumer(source, count, state=store, handle_signals=False)
        assert consumer.run(max_messages=len(keys)).processed == len(keys)
    assert shape(bootstrap, changelog) == (PARTITIONS, "compact")
    expected = {key: 2 * n for key, n in Counter(keys).items()}
    assert latest_counts(read_kafka(bootstrap, changelog)) == expected


def test_dead_letters_go_to_a_topic_laneway_made_like_its_input(
    compat_broker: CompatBroker,
) -> None:
    bootstrap = compat_broker.bootstrap
    topic, group = unique_name("compat-dlq"), unique_name("compat-dlq")
    create_topic(bootstrap, topic, PARTITIONS)
    produce(bootstrap, topic, [(b"k%d" % i, b"bad") for i in range(20)])

    def refuse(message: laneway.Message) -> None:
        raise ValueError("refused")

    source = laneway.KafkaSource(bootstrap, group, [topic])
    consumer = laneway.Consumer(source, refuse, max_retries=0, handle_signals=False)
    stats = consumer.run(max_messages=20)
    assert stats.dead_lettered == 20
    partitions, _ = shape(bootstrap, f"{topic}.dlq")
    assert partitions == PARTITIONS


def test_a_results_topic_that_does_not_exist_is_never_created(
    compat_broker: CompatBroker,
) -> None:
    bootstrap = compat_broker.bootstrap
    topic, group, missing = (unique_name(n) for n in ("compat-res", "compat-res", "missing"))
    create_topic(bootstrap, topic, 2)
    produce(bootstrap, topic, [(b"k", b"v")] * 3)
    source = laneway.KafkaSource(bootstrap, group, [topic])
    consumer = laneway.Consumer(
        source, lambda m: laneway.Produce(missing, b"r"), max_retries=0, handle_signals=False
    )
    done: list[laneway.ConsumerStats] = []
    runner = threading.Thread(target=lambda: done.append(consumer.run(max_messages=3)))
    runner.start()
    runner.join(90)
    assert not runner.is_alive(), consumer.stats()
    assert (done[0].processed, done[0].dead_lettered) == (0, 3)
    assert shape(bootstrap, missing) == (None, None)
