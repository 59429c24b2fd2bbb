"""KafkaShareSource on the real broker (Kafka 4.2, share.version=1).

Members join in about a second: every group here sets ``share.heartbeat.interval.ms`` to
500 ms (``scripts/kafka`` lowers the broker's minimum from 5 s). Several members run as
separate processes (``support/share_member.py``), started together.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
import share_handlers
from checkout import SUPPORT
from kafka_helpers import (
    FAST_SHARE_JOIN,
    create_topic,
    partition_ids,
    produce,
    read_records,
    set_share_group_config,
    share_group_config,
    share_source,
    unique_name,
)
from metrics_recorder import Recorder
from service_runs import Service, wait_until

import laneway
from laneway.metrics import Metric
from laneway.sources.share.acknowledgement import Acknowledgement
from laneway.types import CommitPosition, Message, PartitionId

pytestmark = pytest.mark.kafka

SMALL_BATCHES = {"batch.num.messages": 50}
"""A share group hands out whole producer batches: small ones spread records over members."""
WAIT_S = 60.0


class NoListener:
    def on_assigned(self, positions: dict[PartitionId, CommitPosition | None]) -> None:
        raise AssertionError("a share group assigns nothing")

    def on_revoked(self, partitions: list[PartitionId]) -> None:
        raise AssertionError("a share group revokes nothing")

    on_lost = on_revoked


@pytest.fixture
def record_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    directory = tmp_path / "handled"
    directory.mkdir()
    monkeypatch.setenv(share_handlers.RECORD_DIR, str(directory))
    return directory


@pytest.fixture
def members(record_dir: Path) -> Iterator[list[subprocess.Popen[str]]]:
    started: list[subprocess.Popen[str]] = []
    yield started
    for process in started:
        if process.poll() is None:
            process.kill()
        process.communicate(timeout=30)


def start_member(started: list[subprocess.Popen[str]], **settings: object) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(SUPPORT), *sys.path])}
    process = subprocess.Popen(
        [sys.executable, str(SUPPORT / "share_member.py"), json.dumps(settings)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    started.append(process)
    return process


def topic_with(bootstrap: str, partitions: int) -> tuple[str, str]:
    topic = unique_name("share")
    create_topic(bootstrap, topic, partitions)
    return topic, unique_name("share-group")


def wait_for(processes: list[subprocess.Popen[str]], timeout: float = WAIT_S) -> list[str]:
    outputs = []
    for process in processes:
        output, _ = process.communicate(timeout=timeout)
        assert process.returncode == 0, output
        outputs.append(output)
    return outputs


def warm_up_members(
    bootstrap: str, topic: str, record_dir: Path, count: int, within: float = 30.0
) -> set[tuple[int, int]]:
    """Produce a few records every 0.2 s until ``count`` members handled one (every member
    joined and holds an assignment; a member that joined late on a busy machine would
    otherwise find the records taken, or idle out before they came), within ``within``
    seconds; return the warm-up records' (partition, offset)."""
    placed: set[tuple[int, int]] = set()
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        placed.update(produce(bootstrap, topic, [(None, b"warm")] * 16, settings=SMALL_BATCHES))
        if len({pid for *_, pid in share_handlers.handled(record_dir)}) >= count:
            break
        time.sleep(0.2)
    return placed


@pytest.mark.parametrize("count", [3, 12])
def test_members_share_10000_records_and_none_is_lost(
    kafka_bootstrap: str, record_dir: Path, members: list[subprocess.Popen[str]], count: int
) -> None:
    topic, group = topic_with(kafka_bootstrap, 8)
    for _ in range(count):
        start_member(
            members,
            bootstrap=kafka_bootstrap,
            group=group,
            topic=topic,
            engine="sync",
            idle_timeout=5.0,
            group_config=FAST_SHARE_JOIN,
            config={"max.poll.records": 50},
        )
    for process in members:
        assert process.stdout is not None and process.stdout.readline().strip() == "starting"
    warm_up = warm_up_members(kafka_bootstrap, topic, record_dir, count)
    placed = produce(
        kafka_bootstrap, topic, [(None, b"1") for _ in range(10_000)], settings=SMALL_BATCHES
    )
    wait_for(members)
    handled = [row for row in share_handlers.handled(record_dir) if row[:2] not in warm_up]
    assert {(p, o) for p, o, _, _ in handled} == set(placed), "none lost"
    assert len(handled) == 10_000, "none handled twice"
    per_member = Counter(pid for *_, pid in handled)
    if count == 12:
        assert len(per_member) > 8, f"more members than partitions took part: {per_member}"
    else:
        assert len(per_member) == 3, per_member


def test_release_redelivers_and_reject_does_not(kafka_bootstrap: str) -> None:
    topic, group = topic_with(kafka_bootstrap, 1)
    produce(kafka_bootstrap, topic, [(None, b"%d" % i) for i in range(30)])
    source = share_source(kafka_bootstrap, group, [topic])
    source.open(NoListener())
    try:
        first = poll_some(source)
        assert [m.offset for m in first] == list(range(30))
        assert {m.delivery_count for m in first} == {1}
        kinds = [Acknowledgement.ACCEPT, Acknowledgement.RELEASE, Acknowledgement.REJECT]
        for index, kind in enumerate(kinds):
            source.acknowledge([m for m in first if m.offset % 3 == index], kind)
        again = poll_some(source)
        assert [m.offset for m in again] == [o for o in range(30) if o % 3 == 1]
        assert {m.delivery_count for m in again} == {2}
        source.acknowledge(again, Acknowledgement.ACCEPT)
        assert poll_some(source, within=2.0) == [], "accepted and rejected never come back"
    finally:
        source.close()


def poll_some(source: laneway.KafkaShareSource, within: float = 20.0) -> list[Message]:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        batch = source.poll(1_000, 0.2)
        if batch:
            return batch
    return []


def test_a_sigkilled_members_records_are_delivered_again(
    kafka_bootstrap: str, record_dir: Path, members: list[subprocess.Popen[str]]
) -> None:
    # One partition, so the member that comes after shares it with the dead one at once
    # (a partition of the dead member's alone would wait for its session to expire).
    topic, group = topic_with(kafka_bootstrap, 1)
    values = [b"hang" if i == 20 else b"" for i in range(200)]
    placed = produce(kafka_bootstrap, topic, [(None, v) for v in values])
    hang = placed[20]
    victim = start_member(
        members, bootstrap=kafka_bootstrap, group=group, topic=topic, engine="thread",
        idle_timeout=60.0, group_config=FAST_SHARE_JOIN,
    )  # fmt: skip
    deadline = time.monotonic() + WAIT_S
    while not share_handlers.started(record_dir) and time.monotonic() < deadline:
        time.sleep(0.05)
    [(_, _, delivery, pid)] = share_handlers.started(record_dir)
    assert pid == victim.pid and delivery == 1
    victim.send_signal(signal.SIGKILL)
    victim.communicate(timeout=30)
    before = {(p, o) for p, o, _, _ in share_handlers.handled(record_dir)}

    seen: list[Message] = []
    source = share_source(kafka_bootstrap, group, [topic])
    consumer = laneway.Consumer(source, seen.append, engine="sync", ordering="unordered")
    consumer.run(idle_timeout=3.0)
    again = {(m.partition, m.offset): m.delivery_count for m in seen}
    assert again.get(hang) == 2, f"the record in flight at the kill comes back: {seen}"
    assert before | set(again) == set(placed), "none lost"


def test_a_failing_record_reaches_the_dead_letter_topic_exactly_once(
    kafka_bootstrap: str, record_dir: Path
) -> None:
    topic, group = topic_with(kafka_bootstrap, 4)
    values = [b"fail" if i == 7 else b"" for i in range(400)]
    placed = produce(kafka_bootstrap, topic, [(None, v) for v in values], settings=SMALL_BATCHES)
    recorders = [Recorder(), Recorder()]
    stats = run_members(kafka_bootstrap, group, topic, recorders, engine="thread")
    assert sum(s.processed for s in stats) == 399 and sum(s.failed for s in stats) == 1
    [dead] = read_records(kafka_bootstrap, f"{topic}.dlq", 1)
    headers = dict(dead.headers)
    assert dead.value == b"fail" and headers["laneway.attempts"] == b"3"
    assert headers["laneway.original.offset"] == str(placed[7][1]).encode()
    with pytest.raises(TimeoutError):
        read_records(kafka_bootstrap, f"{topic}.dlq", 2, timeout_s=2.0)
    counters: Counter[tuple[Metric, tuple[str, ...]]] = Counter()
    for recorder in recorders:
        counters.update(recorder.counters)
    assert counters[(Metric.ACKNOWLEDGEMENTS, (topic, "accept"))] == 399
    assert counters[(Metric.ACKNOWLEDGEMENTS, (topic, "release"))] == 2
    assert counters[(Metric.ACKNOWLEDGEMENTS, (topic, "reject"))] == 1
    assert counters[(Metric.RETRIES, (topic,))] == 2
    assert counters[(Metric.REDELIVERIES, (topic,))] >= 2
    assert counters[(Metric.DEAD_LETTERS, (topic,))] == 1
    assert not [key for key in counters if key[0] is Metric.CONSUMER_LAG]


@pytest.mark.parametrize("engine", ["sync", "thread", "async", "process"])
def test_every_engine_consumes_a_share_group_and_retries_by_redelivery(
    kafka_bootstrap: str, record_dir: Path, engine: str
) -> None:
    topic, group = topic_with(kafka_bootstrap, 2)
    values = [b"fail" if i == 3 else b"" for i in range(300)]
    placed = produce(kafka_bootstrap, topic, [(None, v) for v in values])
    [stats] = run_members(kafka_bootstrap, group, topic, [None], engine=engine)
    assert (stats.processed, stats.failed, stats.dead_lettered) == (299, 1, 1)
    handled = share_handlers.handled(record_dir)
    assert {(p, o) for p, o, _, _ in handled} == set(placed) - {placed[3]}
    [dead] = read_records(kafka_bootstrap, f"{topic}.dlq", 1)
    assert dict(dead.headers)["laneway.attempts"] == b"3"


def run_members(
    bootstrap: str, group: str, topic: str, metrics: list[Recorder | None], engine: str
) -> list[laneway.ConsumerStats]:
    """Run one consumer per ``metrics`` backend, in threads of this process, until idle."""
    handler = share_handlers.handle_async if engine == "async" else share_handlers.handle
    consumers = [
        laneway.Consumer(
            share_source(bootstrap, group, [topic]),
            handler,
            engine=engine,
            ordering="unordered",
            max_retries=2,
            retry_backoff=0.01,
            metrics=backend,
        )
        for backend in metrics
    ]
    results: list[laneway.ConsumerStats] = []
    threads = [
        threading.Thread(target=lambda c=c: results.append(c.run(idle_timeout=3.0)))
        for c in consumers
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(WAIT_S)
    assert len(results) == len(consumers)
    return results


def test_a_new_group_reads_the_backlog_by_default_and_latest_skips_it_on_request(
    kafka_bootstrap: str,
) -> None:
    topic, group = topic_with(kafka_bootstrap, 2)
    produce(kafka_bootstrap, topic, [(None, b"old-%d" % i) for i in range(100)])
    seen: list[Message] = []
    laneway.Consumer(
        share_source(kafka_bootstrap, group, [topic]),
        seen.append,
        engine="sync",
        ordering="unordered",
    ).run(max_messages=100)
    assert sorted(m.value or b"" for m in seen) == sorted(b"old-%d" % i for i in range(100))
    assert share_group_config(kafka_bootstrap, group)["share.auto.offset.reset"] == "earliest"

    late = unique_name("share-latest")
    source = share_source(kafka_bootstrap, late, [topic], start_at="latest")
    source.open(NoListener())
    got: list[Message] = []
    try:
        deadline = time.monotonic() + WAIT_S
        while not got and time.monotonic() < deadline:
            # "latest" is where the group first reads a partition: until this member has
            # joined and fetched, a new record may be skipped too, so write until one comes.
            produce(kafka_bootstrap, topic, [(None, b"new")])
            got = poll_some(source, within=2.0)
            source.acknowledge(got, Acknowledgement.ACCEPT)
    finally:
        source.close()
    assert got and {m.value for m in got} == {b"new"}, "the backlog is skipped, on request"


def test_leaving_the_group_config_at_latest_warns_of_the_skipped_backlog(
    kafka_bootstrap: str, caplog: pytest.LogCaptureFixture
) -> None:
    topic, group = topic_with(kafka_bootstrap, 3)
    produce(kafka_bootstrap, topic, [(None, b"%d" % i) for i in range(120)])
    set_share_group_config(kafka_bootstrap, group, {"share.auto.offset.reset": "latest"})
    source = share_source(kafka_bootstrap, group, [topic], start_at="group")
    with caplog.at_level(logging.WARNING, logger="laneway.sources.share.group"):
        source.open(NoListener())
    source.close()
    [warning] = [r.getMessage() for r in caplog.records if "skipped" in r.getMessage()]
    assert "120 records already in " + topic in warning and "start_at='earliest'" in warning
    assert share_group_config(kafka_bootstrap, group)["share.auto.offset.reset"] == "latest"


def test_a_record_past_its_lock_is_warned_about_and_delivered_again(
    kafka_bootstrap: str, caplog: pytest.LogCaptureFixture
) -> None:
    topic, group = topic_with(kafka_bootstrap, 1)
    produce(kafka_bootstrap, topic, [(None, b"slow"), (None, b"fast")])
    runs: list[tuple[int, int | None]] = []

    def handle(message: Message) -> None:
        runs.append((message.offset, message.delivery_count))
        if message.value == b"slow" and message.delivery_count == 1:
            time.sleep(2.6)

    source = laneway.KafkaShareSource(
        kafka_bootstrap, group, [topic], crash_journal=False,
        group_config={**FAST_SHARE_JOIN, "share.record.lock.duration.ms": "2000"},
    )  # fmt: skip
    consumer = laneway.Consumer(
        source, handle, engine="thread", ordering="unordered", commit_interval=0.2
    )
    with caplog.at_level(logging.WARNING, logger="laneway.sources.share.progress"):
        stats = consumer.run(idle_timeout=4.0)  # counted from the last fetch, before "slow"
    messages = [r.getMessage() for r in caplog.records]
    assert any("record lock is 2 s" in m for m in messages), messages
    assert any("refused 1 acknowledgement" in m for m in messages), messages
    assert stats.fenced == 1
    assert sorted(runs) == [(0, 1), (0, 2), (1, 1)], "the slow record ran again, counted"


def test_a_buffer_smaller_than_a_fetch_holds_the_rest_back(kafka_bootstrap: str) -> None:
    topic, group = topic_with(kafka_bootstrap, 2)
    produce(kafka_bootstrap, topic, [(None, b"") for _ in range(1_000)])
    peak = [0]
    consumer: laneway.Consumer

    def handle(message: Message) -> None:
        peak[0] = max(peak[0], consumer.stats().buffered)

    consumer = laneway.Consumer(
        share_source(kafka_bootstrap, group, [topic], config={"max.poll.records": 500}),
        handle,
        engine="thread",
        ordering="unordered",
        max_buffered=20,
        poll_batch_size=20,
    )
    stats = consumer.run(max_messages=1_000)
    assert stats.processed == 1_000
    assert 0 < peak[0] <= 20, peak


def test_a_record_that_kills_its_member_is_dead_lettered_after_two_deaths(
    kafka_bootstrap: str, tmp_path: Path, record_dir: Path
) -> None:
    topic, group = topic_with(kafka_bootstrap, 1)  # shared by every member at once
    set_share_group_config(kafka_bootstrap, group, FAST_SHARE_JOIN)
    values = [b"kill" if i == 30 else b"" for i in range(200)]
    placed = produce(kafka_bootstrap, topic, [(None, v) for v in values])
    poison = placed[30]
    temporary = tmp_path / "tmp"  # the default crash journal lives under TMPDIR
    temporary.mkdir()
    service = Service(
        tmp_path,
        "share_handlers:handle",
        [SUPPORT],
        env={share_handlers.RECORD_DIR: str(record_dir), "TMPDIR": str(temporary)},
    )
    try:
        supervisor = service.start(
            "--bootstrap-servers", kafka_bootstrap, "--group", group, "--topic", topic,
            "--share", "--members", "2",
        )  # fmt: skip
        wait_until(lambda: topic_exists(kafka_bootstrap, f"{topic}.dlq"), WAIT_S, "a dead letter")
        [dead] = read_records(kafka_bootstrap, f"{topic}.dlq", 1, timeout_s=WAIT_S)
        headers = dict(dead.headers)
        assert headers["laneway.error.type"] == b"ProcessDied"
        assert headers["laneway.original.offset"] == str(poison[1]).encode()
        deaths = [row for row in share_handlers.started(record_dir) if row[:2] == poison]
        assert sorted(row[2] for row in deaths) == [1, 2], "two deaths, the second while alone"
        wait_until(
            lambda: (
                {(p, o) for p, o, _, _ in share_handlers.handled(record_dir)}
                == set(placed) - {poison}
            ),
            WAIT_S,
            "every other record handled",
        )
        supervisor.send_signal(signal.SIGTERM)
        output, _ = supervisor.communicate(timeout=WAIT_S)
        assert supervisor.returncode == 0, output
        assert "alone" in output and "died" in output
    finally:
        service.close()


def topic_exists(bootstrap: str, topic: str) -> bool:
    try:
        partition_ids(bootstrap, topic)
    except LookupError:
        return False
    return True
