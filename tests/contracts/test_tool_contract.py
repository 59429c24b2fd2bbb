"""The operator's tools keep one contract on every log: ``laneway lag``, ``top --once`` and
``dlq list|show|replay`` run through the real CLI against a durable embedded log and a real
Kafka broker, on the same records a real laneway consumer committed and dead-lettered, and
must print the same figures. Only how a log is named and seeded differs (``ToolLog``)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Protocol

import pytest
from kafka_helpers import create_topic, produce, unique_name
from ops_cli import laneway, laneway_json

import laneway as lw
from laneway.sources.base import Source
from laneway.types import Message

RECORDS = 12
"""Records written to the input topic: every third fails for good (``bad``)."""
BAD = [i for i in range(RECORDS) if i % 3 == 0]


class ToolLog(Protocol):
    """A log the tools read: its connection flags, and how a test writes and consumes it."""

    connection: tuple[str, ...]
    topic: str

    def create(self, topic: str, partitions: int) -> None: ...

    def produce(self, topic: str, records: list[tuple[bytes, bytes]]) -> None: ...

    def source(self, topic: str, group: str) -> Source: ...

    def release(self) -> None:
        """Let the tools open the log (an embedded log belongs to one process at a time)."""


class EmbeddedToolLog:
    def __init__(self, path: Path) -> None:
        self.connection = ("--log-dir", str(path))
        self.topic = "orders"
        self._log = lw.EmbeddedLog(path)

    def create(self, topic: str, partitions: int) -> None:
        self._log.create_topic(topic, partitions=partitions)

    def produce(self, topic: str, records: list[tuple[bytes, bytes]]) -> None:
        for key, value in records:
            self._log.produce(topic, value, key=key)

    def source(self, topic: str, group: str) -> Source:
        return self._log.subscribe([topic], group)

    def release(self) -> None:
        self._log.close()


class KafkaToolLog:
    def __init__(self, bootstrap: str) -> None:
        self.connection = ("--bootstrap-servers", bootstrap)
        self.topic = unique_name("tools-orders")
        self._bootstrap = bootstrap

    def create(self, topic: str, partitions: int) -> None:
        create_topic(self._bootstrap, topic, partitions)

    def produce(self, topic: str, records: list[tuple[bytes, bytes]]) -> None:
        produce(self._bootstrap, topic, records)

    def source(self, topic: str, group: str) -> Source:
        fast = {"session.timeout.ms": 6000, "heartbeat.interval.ms": 300}
        return lw.KafkaSource(self._bootstrap, group, [topic], fast)

    def release(self) -> None:
        pass


@pytest.fixture(params=["embedded", pytest.param("kafka", marks=pytest.mark.kafka)])
def new_log(request: pytest.FixtureRequest, tmp_path: Path) -> Callable[[], ToolLog]:
    if request.param == "embedded":
        return lambda: EmbeddedToolLog(tmp_path / "log")
    bootstrap = request.getfixturevalue("kafka_bootstrap")
    return lambda: KafkaToolLog(bootstrap)


@pytest.fixture
def seeded(new_log: Callable[[], ToolLog]) -> Iterator[tuple[ToolLog, str]]:
    """A 2-partition topic of :data:`RECORDS` records consumed to the end by a laneway
    group whose handler fails the :data:`BAD` ones (no retries) into ``<topic>.dlq``."""
    log = new_log()
    group = unique_name("tools-group")
    log.create(log.topic, 2)
    log.create(f"{log.topic}.dlq", 1)
    values = [b"bad-%d" % i if i in BAD else b"ok-%d" % i for i in range(RECORDS)]
    log.produce(log.topic, [(b"k%d" % i, value) for i, value in enumerate(values)])

    def handle(message: Message) -> None:
        if message.value is not None and message.value.startswith(b"bad"):
            raise ValueError(f"bad amount {message.value[4:].decode()}")

    consumer = lw.Consumer(
        log.source(log.topic, group), handle, max_retries=0, handle_signals=False
    )
    stats = consumer.run(max_messages=RECORDS)
    assert (stats.processed, stats.dead_lettered) == (RECORDS - len(BAD), len(BAD))
    log.release()
    yield log, group


def test_lag_and_top_show_a_group_that_finished_everything(
    seeded: tuple[ToolLog, str], tmp_path: Path
) -> None:
    log, group = seeded
    found = laneway_json("lag", *log.connection, "--group", group, cwd=tmp_path)
    assert (found["lag"], found["backlog"]) == (0, 0)
    assert [p["partition"] for p in found["partitions"]] == [0, 1]
    assert sum(p["end"] for p in found["partitions"]) == RECORDS
    assert all(p["committed"] == p["end"] for p in found["partitions"])

    top = laneway(
        "top", *log.connection, "--group", group, "--once", "--interval", "0.2", cwd=tmp_path
    )
    assert top.returncode == 0, top.stderr
    assert f"group {group} on " in top.stdout and "lag 0  backlog 0" in top.stdout
    rows = [line.split() for line in top.stdout.splitlines() if line.startswith(log.topic)]
    assert [row[1] for row in rows] == ["0", "1"]


def test_dlq_lists_shows_and_replays_the_dead_letters_once(
    seeded: tuple[ToolLog, str], tmp_path: Path
) -> None:
    log, group = seeded
    where = (*log.connection, "--topic", f"{log.topic}.dlq")
    listed = laneway_json("dlq", "list", *where, cwd=tmp_path)
    assert listed["records"] == len(BAD)
    [row] = listed["groups"]  # by error type: one row for four distinct messages
    assert (row["original_topic"], row["error_type"], row["count"]) == (
        log.topic,
        "ValueError",
        len(BAD),
    )
    assert row["messages"] == len(BAD) and row["example_message"].startswith("bad amount")
    by_message = laneway_json("dlq", "list", *where, "--by", "message", cwd=tmp_path)
    assert sorted(g["error_message"] for g in by_message["groups"]) == sorted(
        f"bad amount {i}" for i in BAD
    )
    shown = laneway("dlq", "show", *where, "--where", "type=ValueError", cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    assert f"shown {len(BAD)} of {len(BAD)} dead letters" in shown.stdout
    assert "bad-" not in shown.stdout  # record contents only with --values

    report = laneway_json("dlq", "replay", *where, cwd=tmp_path)
    assert (report["read"], report["replayed"], report["complete"]) == (len(BAD), len(BAD), True)
    again = laneway_json("dlq", "replay", *where, cwd=tmp_path)
    assert (again["read"], again["replayed"]) == (0, 0)
    behind = laneway_json("lag", *log.connection, "--group", group, cwd=tmp_path)
    assert behind["backlog"] == len(BAD)  # the replayed records wait for the group


def test_the_tools_name_an_unknown_group_or_topic_with_exit_3(
    seeded: tuple[ToolLog, str], tmp_path: Path
) -> None:
    log, _ = seeded
    group = laneway("lag", *log.connection, "--group", "no-such-group", cwd=tmp_path)
    assert group.returncode == 3 and "unknown group 'no-such-group'" in group.stderr
    top = laneway("top", *log.connection, "--group", "no-such-group", "--once", cwd=tmp_path)
    assert top.returncode == 3 and "unknown group 'no-such-group'" in top.stderr
    missing = laneway("dlq", "list", *log.connection, "--topic", "nowhere.dlq", cwd=tmp_path)
    assert missing.returncode == 3 and "nowhere.dlq" in missing.stderr


def test_dlq_says_a_topic_of_plain_records_is_not_a_dead_letter_topic(
    new_log: Callable[[], ToolLog], tmp_path: Path
) -> None:
    log = new_log()
    log.create(log.topic, 2)
    log.produce(log.topic, [(b"k%d" % i, b"%d" % i) for i in range(20)])
    log.release()
    for command in ("list", "show"):
        done = laneway("dlq", command, *log.connection, "--topic", log.topic, cwd=tmp_path)
        assert done.returncode == 2, done.stdout + done.stderr
        assert f"{log.topic} is not a dead-letter topic: none of its 20 records" in done.stderr
