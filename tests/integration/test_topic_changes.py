"""Topics that change under a running KafkaSource consumer, on the real broker: created
while it waits, deleted while it consumes, given more partitions; and under a share group
member (KafkaShareSource), which owns no partition but must say what it waits for.

Before: a deleted topic's partitions stayed owned and every timed commit failed with a
WARNING (one a second); a consumer waiting for a topic looked ready and noticed it only
at librdkafka's 5-minute metadata refresh.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import pytest
from confluent_kafka.admin import NewPartitions
from kafka_helpers import (
    admin_client,
    committed_to_end,
    create_topic,
    produce,
    share_source,
    unique_name,
)

import laneway
from laneway.errors import UnknownTopicError

pytestmark = pytest.mark.kafka

FAST_GROUP = {"session.timeout.ms": 6000, "heartbeat.interval.ms": 300}
SOURCE_LOGGER = "laneway.sources.kafka.source"
NOTICED_S = 20.0
"""The bound on noticing a topic change: the 5 s metadata refresh of wait_for_topics, a
rebalance (a few seconds with the cooperative assignor) and room for a busy machine."""


Source = laneway.KafkaSource | laneway.KafkaShareSource


class Run:
    """A consumer running on a thread, recording what it handled."""

    def __init__(self, source: Source, work: float = 0.0) -> None:
        self.handled: list[tuple[str, int, int]] = []
        self.work = work
        ordering = "unordered" if isinstance(source, laneway.KafkaShareSource) else "key"
        self.consumer = laneway.Consumer(
            source, self._handle, ordering=ordering, handle_signals=False
        )
        self.result: list[laneway.ConsumerStats] = []
        self.error: list[BaseException] = []
        self.thread = threading.Thread(target=self._run)
        self.thread.start()

    def _handle(self, message: laneway.Message) -> None:
        if self.work:
            time.sleep(self.work)
        self.handled.append((message.topic, message.partition, message.offset))

    def _run(self) -> None:
        try:
            self.result.append(self.consumer.run())
        except BaseException as error:  # reported to the test
            self.error.append(error)

    def count(self, topic: str) -> int:
        return sum(1 for t, _, _ in list(self.handled) if t == topic)

    def stop(self) -> laneway.ConsumerStats:
        self.consumer.stop()
        self.thread.join(30)
        assert not self.thread.is_alive()
        if self.error:
            raise self.error[0]
        return self.result[0]


@contextmanager
def running(source: Source, work: float = 0.0) -> Iterator[Run]:
    run = Run(source, work)
    try:
        yield run
    finally:
        if run.thread.is_alive():
            run.consumer.stop()
            run.thread.join(30)


def wait_for(condition: Callable[[], bool], timeout: float, what: str) -> float:
    began = time.monotonic()
    while time.monotonic() - began < timeout:
        if condition():
            return time.monotonic() - began
        time.sleep(0.1)
    raise AssertionError(f"not within {timeout} s: {what}")


def delete_topics(bootstrap: str, *topics: str) -> None:
    admin = admin_client(bootstrap)  # kept until the futures are done
    for future in admin.delete_topics(list(topics)).values():
        future.result(30)


def test_a_deleted_topic_is_given_up_and_reported_once(
    kafka_bootstrap: str, caplog: pytest.LogCaptureFixture
) -> None:
    doomed, kept = unique_name("doomed"), unique_name("kept")
    create_topic(kafka_bootstrap, doomed, partitions=2)
    create_topic(kafka_bootstrap, kept, partitions=2)
    produce(kafka_bootstrap, doomed, [(f"k{i}", "v") for i in range(10)])
    produce(kafka_bootstrap, kept, [(f"k{i}", "v") for i in range(10)])
    group = unique_name("g")
    source = laneway.KafkaSource(kafka_bootstrap, group, [doomed, kept], FAST_GROUP)
    with caplog.at_level(logging.INFO, logger="laneway"), running(source) as run:
        wait_for(lambda: len(run.handled) == 20, 30, "both topics consumed")
        wait_for(lambda: committed_to_end(kafka_bootstrap, group, doomed, 10), 30, "all committed")
        assert run.consumer.health().ready

        delete_topics(kafka_bootstrap, doomed)
        took = wait_for(
            lambda: not {t for t, _ in run.consumer.stats().assigned} & {doomed},
            NOTICED_S,
            "the deleted topic's partitions given up",
        )
        health = run.consumer.health()
        assert not health.ready and repr(doomed) in health.reason, health
        produce(kafka_bootstrap, kept, [(f"k{i}", "w") for i in range(10)])
        wait_for(lambda: run.count(kept) == 20, 30, "the other topic consumed on")
        time.sleep(3.0)  # three more timed commits (commit_interval=1 s)
        stats = run.stop()

    warnings = [r for r in caplog.records if r.levelno >= logging.WARNING]
    about_it = [r for r in warnings if r.name == SOURCE_LOGGER and doomed in r.getMessage()]
    assert len(about_it) == 1, [r.getMessage() for r in warnings]
    assert "gone from the cluster" in about_it[0].getMessage()
    assert not [r for r in warnings if "commit failed" in r.getMessage()], [
        r.getMessage() for r in warnings
    ]
    assert stats.handled == 30
    assert committed_to_end(kafka_bootstrap, group, kept, 20)
    print(f"deleted topic given up after {took:.1f} s")


def test_a_topic_deleted_under_load_does_not_fail_every_commit(
    kafka_bootstrap: str, caplog: pytest.LogCaptureFixture
) -> None:
    # Before: with work of the deleted topic in flight, every timed commit (one a second)
    # failed as a whole, UNKNOWN_TOPIC_OR_PART, the other topic's offsets with it.
    doomed, kept = unique_name("doomed"), unique_name("kept")
    create_topic(kafka_bootstrap, doomed, partitions=2)
    create_topic(kafka_bootstrap, kept, partitions=2)
    produce(kafka_bootstrap, doomed, [(f"k{i % 4}", "v") for i in range(2000)])
    group = unique_name("g")
    source = laneway.KafkaSource(kafka_bootstrap, group, [doomed, kept], FAST_GROUP)
    # Four keys of 10 ms messages: about 5 s of work, most of it still to do when deleted.
    with caplog.at_level(logging.WARNING, logger="laneway"), running(source, 0.01) as run:
        wait_for(lambda: run.count(doomed) >= 50, 30, "the doomed topic being consumed")
        delete_topics(kafka_bootstrap, doomed)
        wait_for(
            lambda: not {t for t, _ in run.consumer.stats().assigned} & {doomed},
            NOTICED_S,
            "the deleted topic's partitions given up",
        )
        produce(kafka_bootstrap, kept, [(f"k{i}", "v") for i in range(20)])
        wait_for(lambda: run.count(kept) == 20, 30, "the other topic consumed")
        time.sleep(4.0)  # four more timed commits
        run.stop()
    failures = [r.getMessage() for r in caplog.records if "commit failed" in r.getMessage()]
    assert len(failures) <= 1, failures  # the one that revealed the deletion, at most
    assert committed_to_end(kafka_bootstrap, group, kept, 20)


def test_every_topic_deleted_ends_the_run_without_wait_for_topics(kafka_bootstrap: str) -> None:
    topic = unique_name("only")
    create_topic(kafka_bootstrap, topic, partitions=1)
    produce(kafka_bootstrap, topic, [("k", "v")])
    source = laneway.KafkaSource(kafka_bootstrap, unique_name("g"), [topic], FAST_GROUP)
    with running(source) as run:
        wait_for(lambda: len(run.handled) == 1, 30, "the topic consumed")
        delete_topics(kafka_bootstrap, topic)
        run.thread.join(NOTICED_S)
        assert not run.thread.is_alive(), "the run should end when nothing is left to read"
    [error] = run.error
    assert isinstance(error, UnknownTopicError)
    assert repr(topic) in str(error) and "wait_for_topics=True" in str(error)


def test_waiting_for_topics_is_not_ready_until_they_exist_then_within_seconds(
    kafka_bootstrap: str,
) -> None:
    topic = unique_name("later")
    source = laneway.KafkaSource(
        kafka_bootstrap, unique_name("g"), [topic], FAST_GROUP, wait_for_topics=True
    )
    with running(source) as run:
        wait_for(lambda: run.consumer.health().state == "running", 30, "the consumer running")
        health = run.consumer.health()
        assert not health.ready
        assert f"does not have topic {topic!r}" in health.reason, health

        create_topic(kafka_bootstrap, topic, partitions=2)
        produce(kafka_bootstrap, topic, [(f"k{i}", "v") for i in range(10)])
        took = wait_for(lambda: run.count(topic) == 10, NOTICED_S, "the new topic consumed")
        wait_for(lambda: run.consumer.health().ready, 5, "ready once the topic exists")

        # Deleted and created again: it waits (not ready) instead of failing, then goes on.
        delete_topics(kafka_bootstrap, topic)
        wait_for(lambda: not run.consumer.health().ready, NOTICED_S, "not ready when deleted")
        assert run.thread.is_alive()
        create_topic(kafka_bootstrap, topic, partitions=1)
        produce(kafka_bootstrap, topic, [("k", "again")])
        wait_for(lambda: run.count(topic) == 11, NOTICED_S, "the re-created topic consumed")
        wait_for(lambda: run.consumer.health().ready, 5, "ready again")
        run.stop()
    print(f"topic created later consumed after {took:.1f} s")


def test_added_partitions_are_consumed_within_seconds_while_waiting_for_topics(
    kafka_bootstrap: str,
) -> None:
    topic = unique_name("grows")
    create_topic(kafka_bootstrap, topic, partitions=1)
    source = laneway.KafkaSource(
        kafka_bootstrap, unique_name("g"), [topic], FAST_GROUP, wait_for_topics=True
    )
    with running(source) as run:
        wait_for(lambda: bool(run.consumer.stats().assigned), 30, "the partition assigned")
        admin = admin_client(kafka_bootstrap)
        for future in admin.create_partitions([NewPartitions(topic, 3)]).values():
            future.result(30)
        # A producer created right after create_partitions may still read one partition
        # from the broker's metadata and put every record into partition 0; the bound is on
        # the consumer noticing, so first make sure the new partitions hold records.
        placed: set[int] = set()
        for _ in range(50):
            placed |= {
                p for p, _ in produce(kafka_bootstrap, topic, [(f"k{i}", "v") for i in range(30)])
            }
            if placed == {0, 1, 2}:
                break
            time.sleep(0.2)
        assert placed == {0, 1, 2}, f"records landed only in partitions {sorted(placed)}"
        took = wait_for(
            lambda: {p for _, p, _ in run.handled} == {0, 1, 2},
            NOTICED_S,
            "the new partitions consumed",
        )
        run.stop()
    print(f"new partitions consumed after {took:.1f} s")


def test_a_share_member_goes_on_with_its_other_topic_and_stops_once_every_one_is_deleted(
    kafka_bootstrap: str,
) -> None:
    # Before: a share member whose topics were deleted logged nothing, stayed ready and
    # idled (librdkafka's share consumer reports no error for a deleted topic).
    kept, doomed = unique_name("share-kept"), unique_name("share-doomed")
    for topic in (kept, doomed):
        create_topic(kafka_bootstrap, topic, partitions=1)
        produce(kafka_bootstrap, topic, [(None, "v")] * 5)
    with running(share_source(kafka_bootstrap, unique_name("share-g"), [kept, doomed])) as run:
        wait_for(lambda: len(run.handled) == 10, 30, "both topics consumed")
        delete_topics(kafka_bootstrap, doomed)
        wait_for(lambda: not run.consumer.health().ready, NOTICED_S, "not ready when deleted")
        assert f"does not have topic {doomed!r}" in run.consumer.health().reason
        produce(kafka_bootstrap, kept, [(None, "more")] * 5)
        wait_for(lambda: run.count(kept) == 10, 30, "the other topic consumed on")
        assert run.thread.is_alive()
        delete_topics(kafka_bootstrap, kept)
        run.thread.join(NOTICED_S)
        assert not run.thread.is_alive(), "the run should end when nothing is left to read"
    [error] = run.error
    assert isinstance(error, UnknownTopicError)
    assert repr(kept) in str(error) and repr(doomed) in str(error)


def test_a_share_member_waiting_for_its_topic_is_not_ready_until_it_exists(
    kafka_bootstrap: str,
) -> None:
    topic = unique_name("share-later")
    with running(
        share_source(kafka_bootstrap, unique_name("share-g"), [topic], wait_for_topics=True)
    ) as run:
        wait_for(lambda: run.consumer.health().state == "running", 30, "the consumer running")
        health = run.consumer.health()
        assert not health.ready
        assert f"does not have topic {topic!r}" in health.reason, health

        create_topic(kafka_bootstrap, topic, partitions=2)
        produce(kafka_bootstrap, topic, [(None, "v")] * 10)
        took = wait_for(lambda: run.count(topic) == 10, NOTICED_S, "the new topic consumed")
        wait_for(lambda: run.consumer.health().ready, 5, "ready once the topic exists")
        run.stop()
    print(f"share member: topic created later consumed after {took:.1f} s")
