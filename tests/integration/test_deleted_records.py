"""Records deleted under a consumer before it read them (DeleteRecords here; retention and a
topic made anew look the same): one WARNING naming the partition, the offset and the log
start, what auto.offset.reset decided, and a count of the records never processed; the
rest is read and committed, never a silent jump, never a loop."""

from __future__ import annotations

import logging
import time

import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient
from kafka_helpers import create_topic, end_offsets, produce, unique_name
from metrics_recorder import Recorder

import laneway
from laneway.metrics import Metric

pytestmark = pytest.mark.kafka


def delete_records(bootstrap: str, topic: str, before: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    target = TopicPartition(topic, 0, before)
    admin.delete_records([target])[target].result(30)


def ours(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "laneway.sources.kafka.source"]


def test_a_committed_offset_below_the_log_start_is_reported_and_counted(
    kafka_bootstrap: str, caplog: pytest.LogCaptureFixture
) -> None:
    topic, group = unique_name("deleted-at-start"), unique_name("deleted-at-start")
    create_topic(kafka_bootstrap, topic, 1)
    produce(kafka_bootstrap, topic, [(b"k%d" % (i % 5), b"v") for i in range(200)])
    committer = Consumer({"bootstrap.servers": kafka_bootstrap, "group.id": group})
    committer.commit(offsets=[TopicPartition(topic, 0, 5)], asynchronous=False)
    committer.close()
    delete_records(kafka_bootstrap, topic, 50)
    metrics = Recorder()
    source = laneway.KafkaSource(kafka_bootstrap, group, [topic])
    consumer = laneway.Consumer(source, lambda m: None, handle_signals=False, metrics=metrics)
    with caplog.at_level(logging.WARNING, logger="laneway.sources.kafka.source"):
        stats = consumer.run(max_messages=150)
    assert (stats.processed, stats.deleted_unread) == (150, 45)
    warned = [m for m in ours(caplog) if "below the log start" in m]
    assert len(warned) == 1
    assert f"{topic}[0]" in warned[0] and "committed offset 5" in warned[0]
    assert "log start 50" in warned[0] and "auto.offset.reset=earliest" in warned[0]
    assert metrics.counters[(Metric.RECORDS_DELETED_UNREAD, (topic,))] == 45


def test_records_deleted_while_the_member_reads_are_reported_and_counted(
    kafka_bootstrap: str, caplog: pytest.LogCaptureFixture
) -> None:
    topic, group = unique_name("deleted-midway"), unique_name("deleted-midway")
    total = 3000
    create_topic(kafka_bootstrap, topic, 1)
    produce(kafka_bootstrap, topic, [(b"k%d" % (i % 10), b"v" * 1000) for i in range(total)])
    seen: list[int] = []
    by_key: dict[bytes, list[int]] = {}

    def handle(message: laneway.Message) -> None:
        seen.append(message.offset)
        by_key.setdefault(message.key or b"", []).append(message.offset)
        if len(seen) == 50:  # the member is far behind what it fetched: delete under it
            delete_records(kafka_bootstrap, topic, 2000)
        time.sleep(0.001)

    small_fetches = {
        "queued.max.messages.kbytes": 64,
        "max.partition.fetch.bytes": 20_000,
        "fetch.max.bytes": 20_000,
        "message.max.bytes": 10_000,
    }
    source = laneway.KafkaSource(kafka_bootstrap, group, [topic], small_fetches)
    consumer = laneway.Consumer(source, handle, handle_signals=False, max_buffered=100)
    with caplog.at_level(logging.WARNING, logger="laneway.sources.kafka.source"):
        stats = consumer.run(idle_timeout=3)
    warned = [m for m in ours(caplog) if "were deleted before this member read them" in m]
    assert len(warned) == 1, ours(caplog)
    assert f"{topic}[0]" in warned[0] and "log start is 2000" in warned[0]
    assert stats.deleted_unread > 0
    assert stats.processed + stats.deleted_unread == total
    assert all(offsets == sorted(offsets) for offsets in by_key.values())
    assert len(set(seen)) == len(seen) and max(seen) == total - 1
    assert stats.committed[(topic, 0)] == end_offsets(kafka_bootstrap, topic)[0]
