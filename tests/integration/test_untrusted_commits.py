"""Nothing read from the group skips a record: commit metadata claiming offsets at or past
the log end, and a committed offset past the end, written by another tool (a plain
confluent-kafka consumer's commit on the real broker, a plain EmbeddedSource's commit on
the embedded log) or left by a log that lost its tail. The position is checked against the
end when the partition is assigned, so the records the claims would hide are produced
after that; the embedded log also drops such claims when they are committed."""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable
from pathlib import Path

import kafka_helpers
import pytest
from topics import SOURCES, EmbeddedTopic, KafkaTopic, LogTopic, commit_by_hand

import laneway
from laneway.offsets.codec import decode, encode, encode_window
from laneway.offsets.log_end import clip
from laneway.sources.base import Source
from laneway.sources.embedded.segment import FILE_HEADER, LogDirectory
from laneway.types import CommitPosition, Message

GROUP = "untrusted"


def hand_commit(topic: LogTopic, offset: int, metadata: str) -> None:
    """Commit ``offset`` with ``metadata`` on partition 0 for GROUP, as another tool would."""
    commit_by_hand(topic, GROUP, offset, metadata)
    if isinstance(topic, EmbeddedTopic):
        # The embedded log keeps no claim at or past its end (Kafka stores what it gets).
        kept, dropped = clip(metadata, offset, topic.log.end_offsets(topic.name)[0])
        metadata = kept if dropped else metadata
    assert topic.committed(GROUP)[0] == (offset, metadata)


def consume(
    topic: LogTopic,
    then: Callable[[], object] = lambda: None,
    source: Source | None = None,
    settle: float = 0.0,
) -> tuple[list[int], laneway.ConsumerStats]:
    """Run laneway's consumer of GROUP (on ``source``, else the topic's) until idle,
    calling ``then`` (say, producing more) ``settle`` seconds after it owns the partition:
    the offsets handled, in order."""
    handled: list[int] = []

    def handle(message: Message) -> None:
        handled.append(message.offset)

    consumer = laneway.Consumer(
        source or topic.source(GROUP), handle, engine="sync", handle_signals=False
    )

    def once_assigned() -> None:
        deadline = time.monotonic() + 30
        while not consumer.stats().assigned and time.monotonic() < deadline:
            time.sleep(0.02)
        time.sleep(settle)
        then()

    helper = threading.Thread(target=once_assigned)
    helper.start()
    stats = consumer.run(idle_timeout=3.0)
    helper.join()
    return handled, stats


CHECKERS = ("laneway.offsets.log_end", "laneway.sources.embedded.coordinator")
"""The loggers of the checks: at assignment (every source), at commit (the embedded log)."""


def warnings_of(caplog: pytest.LogCaptureFixture, loggers: tuple[str, ...] = CHECKERS) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name in loggers]


@pytest.mark.parametrize("source_kind", SOURCES)
def test_metadata_claiming_offsets_past_the_end_skips_no_record_written_there(
    source_kind: str, make_topic: Callable[[str, int], LogTopic], caplog: pytest.LogCaptureFixture
) -> None:
    topic = make_topic(source_kind, 1)
    topic.produce([(b"k", b"v%d" % i) for i in range(15)])
    # Committed 10; 12 and 13 exist and are claimed finished (kept: skipped); 20-25 do not
    # exist yet (dropped: their records must run when written).
    with caplog.at_level(logging.WARNING):
        hand_commit(topic, 10, encode(10, {12, 13, *range(20, 26)}))
        handled, stats = consume(
            topic, lambda: topic.produce([(b"k", b"v%d" % i) for i in range(15, 30)])
        )
    assert handled == [10, 11, *range(14, 30)], "a record written after the commit was skipped"
    assert stats.skipped == 2
    [warning] = warnings_of(caplog)
    assert "orders" in warning and "claims offsets 20-25 (6 offsets)" in warning
    assert "past the log end 15" in warning
    assert topic.committed(GROUP)[0] == (30, "")


@pytest.mark.parametrize("source_kind", SOURCES)
def test_a_committed_offset_past_the_end_neither_skips_nor_loops(
    source_kind: str, make_topic: Callable[[str, int], LogTopic], caplog: pytest.LogCaptureFixture
) -> None:
    topic = make_topic(source_kind, 1)
    topic.produce([(b"k", b"old")] * 10)
    hand_commit(topic, 1000, encode(1000, {1001, 1002}))
    with caplog.at_level(logging.WARNING, logger="laneway.offsets.log_end"):
        handled, stats = consume(topic, lambda: topic.produce([(b"k", b"new")] * 10))
    # Kafka: auto.offset.reset=earliest (laneway's default) reads the partition again;
    # the embedded log trimmed what the group had committed, so it starts at 10.
    first = 0 if source_kind == "kafka" else 10
    assert handled == list(range(first, 20)), "skipped or repeated records"
    assert stats.skipped == 0
    [warning] = warnings_of(caplog, ("laneway.offsets.log_end",))
    assert "the committed offset 1000 is beyond the log end 10" in warning
    assert topic.committed(GROUP)[0] == (20, "")
    again, _ = consume(topic)
    assert again == [], "ran records again after committing them"


@pytest.mark.kafka
def test_latest_reset_starts_at_the_end_the_partition_had_when_assigned(
    kafka_bootstrap: str,
) -> None:
    topic = KafkaTopic(kafka_bootstrap, 1)
    topic.produce([(b"k", b"old")] * 10)
    hand_commit(topic, 1000, encode(1000, {1001, 1002}))
    source = laneway.KafkaSource(
        kafka_bootstrap, GROUP, [topic.name], {"auto.offset.reset": "latest"}
    )
    # settle: librdkafka resolves "the end" when it starts fetching, just after assigning
    handled, _ = consume(topic, lambda: topic.produce([(b"k", b"new")] * 5), source, 1.0)
    assert handled == list(range(10, 15))
    assert kafka_helpers.committed_offsets(kafka_bootstrap, GROUP, topic.name)[0] == (15, "")


def test_an_embedded_log_that_lost_its_tail_skips_nothing_written_after(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with laneway.EmbeddedLog(path=tmp_path) as log:
        log.create_topic("orders", partitions=1)
        for i in range(20):
            log.produce("orders", b"v%d" % i, key=b"k")
        stats = laneway.Consumer(
            log.subscribe(["orders"], group=GROUP), lambda m: None, handle_signals=False
        ).run(max_messages=20)
        assert stats.processed == 20
        assert log.committed(GROUP, "orders")[0].offset == 20
    segment = tmp_path / "orders" / "0.log"
    data = segment.read_bytes()
    segment.write_bytes(data[: frame_starts(data)[15]])  # the unsynced tail: records 15-19
    with caplog.at_level(logging.WARNING), laneway.EmbeddedLog(path=tmp_path) as log:
        assert log.end_offsets("orders") == {0: 15}
        for i in range(15, 25):
            log.produce("orders", b"new%d" % i, key=b"k")
        handled: list[bytes | None] = []
        laneway.Consumer(
            log.subscribe(["orders"], group=GROUP),
            lambda m: handled.append(m.value),
            handle_signals=False,
        ).run(idle_timeout=1.0)
        assert handled == [b"new%d" % i for i in range(15, 25)], "records after the cut skipped"
        assert log.committed(GROUP, "orders")[0] == CommitPosition(25, "", 1)
    assert "the committed offset 20 is beyond the log end 15" in caplog.text
    # No torn frame showed the loss; the commit past the end did: a new generation.
    generations = json.loads((tmp_path / "orders" / "0.generations.json").read_text())
    assert generations["generations"] == [[0, 0], [15, 1]]


@pytest.mark.parametrize("source_kind", SOURCES)
def test_a_non_canonical_map_is_ignored_and_reading_starts_at_the_commit(
    source_kind: str, make_topic: Callable[[str, int], LogTopic], caplog: pytest.LogCaptureFixture
) -> None:
    topic = make_topic(source_kind, 1)
    topic.produce([(b"k", b"v")] * 10)
    hand_commit(topic, 5, "lw1:r:5:AAE")  # offset 6 as runs, where the bitset is shorter
    assert decode("lw1:r:5:AAE", 5) == frozenset()
    with caplog.at_level(logging.WARNING, logger="laneway.offsets.codec"):
        handled, stats = consume(topic)
    assert handled == list(range(5, 10)) and stats.skipped == 0
    assert sum("not canonical" in r.getMessage() for r in caplog.records) == 1


def frame_starts(data: bytes) -> list[int]:
    """Where each record frame of a partition file starts."""
    starts, position = [], len(FILE_HEADER)
    while position < len(data):
        starts.append(position)
        position += 8 + int.from_bytes(data[position : position + 4], "little")
    return starts


def test_a_claim_of_an_older_generation_skips_no_record_written_after_the_cut(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # The embedded log's epochs: a cut tail starts a generation. A claim made before the
    # cut (generation 0) about an offset written again after it (generation 1) names a
    # record that is gone: the record there now is processed; one below the cut stands.
    with laneway.EmbeddedLog(path=tmp_path) as log:
        log.create_topic("orders", partitions=1)
        for i in range(10):
            log.produce("orders", b"old%d" % i, key=b"k%d" % i)
    segment = tmp_path / "orders" / "0.log"
    data = segment.read_bytes()
    segment.write_bytes(data[: frame_starts(data)[7] + 5])  # records 7-9 lost, 7 torn
    with caplog.at_level(logging.WARNING), laneway.EmbeddedLog(path=tmp_path) as log:
        assert "records from offset 7 on are of generation 1" in caplog.text
        for i in range(7, 12):
            log.produce("orders", b"new%d" % i, key=b"k%d" % i)
    generations = json.loads((tmp_path / "orders" / "0.generations.json").read_text())
    assert generations["generations"] == [[0, 0], [7, 1]]
    # A commit written before the cut (as a member that claimed 6 and 8 would have left it).
    claims = encode_window(5, bytes([1, 0, 1]), [(0, 0)])
    directory = LogDirectory(tmp_path)
    directory.save_commits(GROUP, {("orders", 0): CommitPosition(5, claims, 0)}, 1)
    directory.close()
    handled: list[tuple[int, bytes | None]] = []
    with caplog.at_level(logging.WARNING), laneway.EmbeddedLog(path=tmp_path) as log:
        stats = laneway.Consumer(
            log.subscribe(["orders"], group=GROUP),
            lambda m: handled.append((m.offset, m.value)),
            handle_signals=False,
        ).run(idle_timeout=1.0)
        assert log.committed(GROUP, "orders")[0] == CommitPosition(12, "", 1)
    assert handled == [(5, b"old5"), *((i, b"new%d" % i) for i in range(7, 12))]
    assert stats.skipped == 1  # 6: its record is the one the claim was made about
    assert "claims 1 offset(s) finished (first 8, read in epoch 0)" in caplog.text
