"""EmbeddedLog: producing, routing, validation, capacity policies, trimming and threads."""

from __future__ import annotations

import gc
import threading
import time
import tracemalloc

import pytest
from topics import AssignmentListener

from laneway.errors import ConfigError, LogFullError, SourceError, UnknownTopicError
from laneway.sources.embedded.log import EmbeddedLog, EmbeddedSource
from laneway.sources.embedded.partitioner import partition_for_key
from laneway.types import CommitPosition, Message, PartitionId


def reader(log: EmbeddedLog, topic: str, group: str) -> EmbeddedSource:
    source = log.subscribe([topic], group=group)
    source.open(AssignmentListener())
    return source


def drain(source: EmbeddedSource, batch: int = 1000) -> list[Message]:
    out: list[Message] = []
    for _ in range(10_000):
        got = source.poll(batch, 0.0)
        if not got:
            return out
        out += got
    raise AssertionError("drain did not finish")


def commit_all(source: EmbeddedSource, messages: list[Message]) -> None:
    ends: dict[PartitionId, int] = {}
    for m in messages:
        ends[(m.topic, m.partition)] = max(ends.get((m.topic, m.partition), 0), m.offset + 1)
    source.commit({pid: CommitPosition(end) for pid, end in ends.items()})


def test_produce_assigns_increasing_offsets_and_poll_returns_the_records() -> None:
    with EmbeddedLog() as log:
        log.create_topic("orders", partitions=2)
        assert log.produce("orders", b"a", partition=0) == (0, 0)
        assert log.produce("orders", b"b", partition=0) == (0, 1)
        assert log.produce("orders", b"c", partition=1) == (1, 0)
        before = time.time_ns() // 1_000_000
        log.produce("orders", None, key=b"k", headers=[("h", b"v"), ("n", None)], partition=1)
        log.produce("orders", b"e", timestamp=1234, partition=1)
        got = sorted(drain(reader(log, "orders", "g")), key=lambda m: (m.partition, m.offset))
        assert [(m.partition, m.offset, m.value) for m in got] == [
            (0, 0, b"a"),
            (0, 1, b"b"),
            (1, 0, b"c"),
            (1, 1, None),
            (1, 2, b"e"),
        ]
        keyed = got[3]
        assert (keyed.topic, keyed.key, keyed.headers) == (
            "orders",
            b"k",
            (("h", b"v"), ("n", None)),
        )
        assert before <= keyed.timestamp <= time.time_ns() // 1_000_000
        assert got[4].timestamp == 1234
        assert log.end_offsets("orders") == {0: 2, 1: 3}
        assert (log.topics(), log.partitions("orders")) == (["orders"], 2)


def test_keys_use_murmur2_none_goes_round_robin_and_partition_overrides() -> None:
    with EmbeddedLog() as log:
        log.create_topic("t", partitions=8)
        for i in range(50):
            key = f"user-{i}".encode()
            assert log.produce("t", b"", key=key)[0] == partition_for_key(key, 8)
        assert [log.produce("t", b"")[0] for _ in range(16)] == list(range(8)) * 2
        assert log.produce("t", b"", key=b"user-1", partition=5)[0] == 5
        log.create_topic("u", partitions=3)
        assert [log.produce("u", b"")[0] for _ in range(4)] == [0, 1, 2, 0]


def test_two_groups_get_the_same_message_objects() -> None:
    with EmbeddedLog() as log:
        log.create_topic("t", partitions=3)
        for i in range(30):
            log.produce("t", b"%d" % i)
        first = drain(reader(log, "t", "a"))
        second = drain(reader(log, "t", "b"))
        assert len(first) == 30
        key = sorted(range(30), key=lambda i: (first[i].partition, first[i].offset))
        by_position = {(m.partition, m.offset): m for m in second}
        assert all(by_position[(first[i].partition, first[i].offset)] is first[i] for i in key)


def test_create_topic_is_idempotent_and_rejects_a_different_count() -> None:
    with EmbeddedLog() as log:
        log.create_topic("t", partitions=4)
        log.create_topic("t", partitions=4)
        with pytest.raises(ConfigError, match=r"partitions=5 conflicts .* 4 partitions"):
            log.create_topic("t", partitions=5)
        assert log.partitions("t") == 4


@pytest.mark.parametrize(
    ("kwargs", "pattern"),
    [
        ({"capacity": 0}, r"capacity=0 .* >= 1"),
        ({"capacity": -5}, r"capacity=-5"),
        ({"capacity": 1.5}, r"capacity=1.5 .* whole number"),
        ({"capacity": True}, r"capacity=True"),
        ({"when_full": "later"}, r"when_full='later' .* 'block', 'error', 'drop_newest'"),
    ],
)
def test_invalid_log_options_name_the_option(kwargs: dict[str, object], pattern: str) -> None:
    with pytest.raises(ConfigError, match=pattern):
        EmbeddedLog(**kwargs)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("name", "partitions", "pattern"),
    [
        ("t", 0, r"partitions=0"),
        ("t", "8", r"partitions='8'"),
        ("", 1, r"topic name '' is not valid"),
        ("a/b", 1, r"topic name 'a/b' .* letters, digits"),
        ("..", 1, r"topic name '\.\.'"),
        ("x" * 250, 1, r"1-249 characters"),
    ],
)
def test_invalid_topics_name_the_problem(name: str, partitions: object, pattern: str) -> None:
    with EmbeddedLog() as log, pytest.raises(ConfigError, match=pattern):
        log.create_topic(name, partitions=partitions)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("kwargs", "pattern"),
    [
        ({"value": "text"}, r"value='text' .* bytes or None"),
        ({"value": bytearray(b"x")}, r"value=bytearray"),
        ({"key": 7}, r"key=7 .* bytes or None"),
        ({"headers": [("h", "text")]}, r"headers=.* \(str, bytes \| None\) pairs"),
        ({"headers": [(1, b"x")]}, r"headers="),
        ({"headers": [("h",)]}, r"headers="),
        ({"headers": "h=v"}, r"headers='h=v'"),
        ({"timestamp": -1}, r"timestamp=-1"),
        ({"timestamp": 1.5}, r"timestamp=1.5"),
        ({"partition": 3}, r"partition=3 .* partitions 0..2"),
        ({"partition": -1}, r"partition=-1"),
        ({"partition": "1"}, r"partition='1'"),
        ({"timeout": -1}, r"timeout=-1"),
    ],
)
def test_invalid_produce_arguments_name_the_option(kwargs: dict[str, object], pattern: str) -> None:
    with EmbeddedLog() as log:
        log.create_topic("t", partitions=3)
        arguments: dict[str, object] = {"value": b"v", **kwargs}
        with pytest.raises(ConfigError, match=pattern):
            log.produce("t", **arguments)  # type: ignore[arg-type]
        assert log.end_offsets("t") == {0: 0, 1: 0, 2: 0}


def test_unknown_topics_raise_unknown_topic_error_with_the_name() -> None:
    with EmbeddedLog() as log:
        log.create_topic("orders")
        with pytest.raises(
            UnknownTopicError, match=r"unknown topic 'ordrs'.*topics: orders"
        ) as raised:
            log.produce("ordrs", b"v")
        assert str(raised.value).startswith("unknown topic"), "a sentence, not a quoted key"
        assert "'ordrs' (did you mean 'orders'?)" in str(raised.value)
        with pytest.raises(UnknownTopicError, match="'ordrs'"):
            log.subscribe(["orders", "ordrs"], group="g")
        with pytest.raises(UnknownTopicError, match="'ordrs'"):
            log.produce_many("ordrs", [(None, b"v")])
        for query in (log.end_offsets, log.partitions):
            with pytest.raises(UnknownTopicError):
                query("ordrs")


def test_invalid_subscribe_and_poll_arguments() -> None:
    with EmbeddedLog() as log:
        log.create_topic("t")
        with pytest.raises(ConfigError, match="group=''"):
            log.subscribe(["t"], group="")
        with pytest.raises(ConfigError, match=r"topics=\[\]"):
            log.subscribe([], group="g")
        with pytest.raises(ConfigError, match="session_timeout=0"):
            log.subscribe(["t"], group="g", session_timeout=0)
        source = log.subscribe("t", group="g")
        with pytest.raises(SourceError, match="open"):
            source.poll(10, 0.0)
        source.open(AssignmentListener())
        with pytest.raises(ConfigError, match="max_messages=0"):
            source.poll(0, 0.0)


def test_when_full_error_raises_until_a_commit_makes_room() -> None:
    with EmbeddedLog(capacity=3, when_full="error") as log:
        log.create_topic("t", partitions=2)
        for _ in range(3):
            log.produce("t", b"v", partition=1)
        with pytest.raises(LogFullError, match=r"topic 't' partition 1 holds capacity=3"):
            log.produce("t", b"v", partition=1)
        assert log.produce("t", b"v", partition=0) == (0, 0)
        source = reader(log, "t", "g")
        got = drain(source)
        source.commit({("t", 1): CommitPosition(2)})
        assert log.produce("t", b"v", partition=1) == (1, 3)
        assert log.produce("t", b"v", partition=1) == (1, 4)
        with pytest.raises(LogFullError):
            log.produce("t", b"v", partition=1)
        assert len(got) == 4


def test_a_log_nobody_subscribed_to_fills_up() -> None:
    with EmbeddedLog(capacity=2, when_full="error") as log:
        log.create_topic("t")
        log.produce("t", b"1")
        log.produce("t", b"2")
        with pytest.raises(LogFullError):
            log.produce("t", b"3")


def test_drop_newest_discards_and_counts() -> None:
    with EmbeddedLog(capacity=2, when_full="drop_newest") as log:
        log.create_topic("t")
        results = [log.produce("t", b"%d" % i) for i in range(5)]
        assert results == [(0, 0), (0, 1), (0, -1), (0, -1), (0, -1)]
        assert [m.value for m in drain(reader(log, "t", "g"))] == [b"0", b"1"]
        stats = log.stats()
        assert (stats.produced, stats.dropped_newest, stats.dropped_oldest) == (2, 3, 0)
        assert stats.partition_sizes == {("t", 0): 2}


def test_drop_oldest_discards_the_oldest_unconsumed_and_readers_skip_the_gap() -> None:
    with EmbeddedLog(capacity=3, when_full="drop_oldest") as log:
        log.create_topic("t")
        source = reader(log, "t", "g")
        for i in range(2):
            log.produce("t", b"%d" % i)
        early = source.poll(1, 0.0)
        source.commit({("t", 0): CommitPosition(1)})
        for i in range(2, 7):
            log.produce("t", b"%d" % i)
        assert log.start_offsets("t") == {0: 4}
        assert log.end_offsets("t") == {0: 7}
        stats = log.stats()
        assert (stats.produced, stats.dropped_oldest, stats.trimmed) == (7, 3, 1)
        rest = drain(source)
        assert [m.offset for m in early + rest] == [0, 4, 5, 6]
        assert [m.value for m in rest] == [b"4", b"5", b"6"]
        source.commit({("t", 0): CommitPosition(7)})
        assert log.stats().partition_sizes == {("t", 0): 0}


def test_block_waits_for_a_commit_then_completes() -> None:
    with EmbeddedLog(capacity=2, when_full="block") as log:
        log.create_topic("t")
        source = reader(log, "t", "g")
        log.produce("t", b"0")
        log.produce("t", b"1")
        result: list[tuple[int, int]] = []
        producer = threading.Thread(target=lambda: result.append(log.produce("t", b"2")))
        producer.start()
        producer.join(0.3)
        assert producer.is_alive() and result == []
        assert log.stats().blocked == 1
        got = source.poll(10, 0.0)
        assert [m.offset for m in got] == [0, 1]
        source.commit({("t", 0): CommitPosition(1)})
        producer.join(5.0)
        assert not producer.is_alive()
        assert result == [(0, 2)]
        assert [m.value for m in source.poll(10, 1.0)] == [b"2"]


def test_block_gives_up_after_the_timeout_and_close_releases_waiters() -> None:
    log = EmbeddedLog(capacity=1)
    log.create_topic("t")
    log.produce("t", b"0")
    started = time.monotonic()
    with pytest.raises(LogFullError, match="until the produce timeout"):
        log.produce("t", b"1", timeout=0.2)
    assert 0.15 <= time.monotonic() - started < 2.0
    errors: list[BaseException] = []

    def blocked() -> None:
        try:
            log.produce("t", b"2")
        except SourceError as exc:
            errors.append(exc)

    thread = threading.Thread(target=blocked)
    thread.start()
    thread.join(0.2)
    assert thread.is_alive()
    log.close()
    thread.join(5.0)
    assert not thread.is_alive()
    assert len(errors) == 1 and "closed" in str(errors[0])
    with pytest.raises(SourceError, match="closed"):
        log.produce("t", b"3")


def test_concurrent_producers_lose_nothing_and_keep_per_key_order() -> None:
    threads, per_thread = 4, 5_000
    with EmbeddedLog() as log:
        log.create_topic("t", partitions=6)

        def work(tid: int) -> None:
            for seq in range(per_thread):
                log.produce("t", b"%d:%d" % (tid, seq), key=b"t%d-k%d" % (tid, seq % 17))

        workers = [threading.Thread(target=work, args=(t,)) for t in range(threads)]
        for w in workers:
            w.start()
        for w in workers:
            w.join(60.0)
        got = drain(reader(log, "t", "g"))
        assert len(got) == threads * per_thread
        for p in range(6):
            offsets = [m.offset for m in got if m.partition == p]
            assert offsets == list(range(log.end_offsets("t")[p]))
        last_seq: dict[bytes, int] = {}
        for m in sorted(got, key=lambda m: (m.partition, m.offset)):
            assert m.key is not None and m.value is not None
            assert m.partition == partition_for_key(m.key, 6)
            seq = int(m.value.split(b":")[1])
            assert seq > last_seq.get(m.key, -1)
            last_seq[m.key] = seq
        assert len(last_seq) == threads * 17


def test_blocking_producers_and_a_committing_consumer_move_everything_in_order() -> None:
    producers, per_producer = 4, 3_000
    with EmbeddedLog(capacity=50, when_full="block") as log:
        log.create_topic("t", partitions=3)
        source = reader(log, "t", "g")

        def work(tid: int) -> None:
            for seq in range(per_producer):
                log.produce("t", b"%d" % seq, key=b"p%d" % tid, timeout=30.0)

        workers = [threading.Thread(target=work, args=(t,)) for t in range(producers)]
        for w in workers:
            w.start()
        seen: dict[bytes | None, list[int]] = {}
        deadline = time.monotonic() + 60.0
        while sum(map(len, seen.values())) < producers * per_producer:
            assert time.monotonic() < deadline
            batch = source.poll(64, 0.5)
            for m in batch:
                assert m.value is not None
                seen.setdefault(m.key, []).append(int(m.value))
            if batch:
                commit_all(source, batch)
        for w in workers:
            w.join(10.0)
        assert all(values == list(range(per_producer)) for values in seen.values())
        assert max(log.stats().partition_sizes.values()) <= 50


def test_commits_of_every_group_trim_and_release_memory() -> None:
    with EmbeddedLog() as log:
        log.create_topic("t", partitions=2)
        fast, slow = reader(log, "t", "fast"), reader(log, "t", "slow")
        gc.collect()
        tracemalloc.start()
        try:
            for i in range(10_000):
                log.produce("t", bytes(1024), key=b"%d" % i)
            loaded = tracemalloc.get_traced_memory()[0]
            commit_all(fast, drain(fast))
            assert log.stats().trimmed == 0
            assert sum(log.stats().partition_sizes.values()) == 10_000
            commit_all(slow, drain(slow))
            gc.collect()
            released = tracemalloc.get_traced_memory()[0]
        finally:
            tracemalloc.stop()
        stats = log.stats()
        assert stats.trimmed == 10_000
        assert stats.partition_sizes == {("t", 0): 0, ("t", 1): 0}
        assert loaded - released > 8_000_000
        assert log.start_offsets("t") == log.end_offsets("t")
        late = reader(log, "t", "late")
        log.produce("t", b"new", partition=0)
        assert [m.value for m in drain(late)] == [b"new"]


def test_produce_many_routes_like_produce_and_applies_the_policy() -> None:
    with EmbeddedLog() as log:
        log.create_topic("t", partitions=4)
        records = [(b"k%d" % i, b"v%d" % i) for i in range(8)] + [(None, b"rr")] * 5
        assert log.produce_many("t", records) == 13
        got = drain(reader(log, "t", "g"))
        assert len(got) == 13
        for m in got:
            if m.key is not None:
                assert m.partition == partition_for_key(m.key, 4)
        assert sorted(m.partition for m in got if m.key is None) == [0, 0, 1, 2, 3]
        with pytest.raises(ConfigError, match="value='x'"):
            log.produce_many("t", [(None, "x")])  # type: ignore[list-item]
    with EmbeddedLog(capacity=2, when_full="drop_newest") as full:
        full.create_topic("t", partitions=4)
        assert full.produce_many("t", [(b"same", b"%d" % i) for i in range(5)]) == 2
        assert full.stats().dropped_newest == 3
