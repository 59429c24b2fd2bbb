"""Retries, dead letters, on_failure and the poison-key breaker, on both sources."""

from __future__ import annotations

import asyncio
import threading
import time
from collections import defaultdict
from collections.abc import Callable

import pytest
from topics import SOURCES, EmbeddedTopic, LogTopic

import laneway
from laneway.types import Message


class Calls:
    """Thread-safe record of handler calls: (key, offset, monotonic time)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.calls: list[tuple[bytes | None, int, float]] = []

    def add(self, m: Message) -> None:
        with self.lock:
            self.calls.append((m.key, m.offset, time.monotonic()))

    def of(self, offset: int) -> list[float]:
        return [t for _, o, t in self.calls if o == offset]


def committed_all(topic: LogTopic, group: str) -> bool:
    return {p: o for p, (o, _) in topic.committed(group).items()} == topic.end_offsets()


@pytest.mark.parametrize("source_kind", SOURCES)
@pytest.mark.parametrize("engine", ["sync", "thread", "async"])
def test_max_retries_zero_runs_once_and_dead_letters_never_commits_unprocessed(
    engine: str, source_kind: str, make_topic: Callable[[str, int], LogTopic]
) -> None:
    topic = make_topic(source_kind, 1)
    topic.produce([(b"k", b"ok"), (b"k", b"bad"), (b"k", b"ok")])
    calls = Calls()

    def handle(m: Message) -> None:
        calls.add(m)
        if m.value == b"bad":
            raise ValueError("refused")

    async def handle_async(m: Message) -> None:
        handle(m)

    consumer = laneway.Consumer(
        topic.source("g"),
        handle_async if engine == "async" else handle,
        engine=engine,
        max_retries=0,
        handle_signals=False,
    )
    stats = consumer.run(max_messages=3)
    assert len(calls.of(1)) == 1, "max_retries=0 must run the handler exactly once"
    assert [o for _, o, _ in calls.calls] == [0, 1, 2], "the failure was not run in order"
    assert (stats.processed, stats.failed, stats.dead_lettered) == (2, 1, 1)
    [(key, value, headers)] = topic.read(f"{topic.name}.dlq", 1)
    assert (key, value) == (b"k", b"bad")
    named = dict(headers)
    assert named["laneway.error.type"] == b"ValueError"
    assert named["laneway.error.message"] == b"refused"
    assert named["laneway.attempts"] == b"1"
    assert named["laneway.original.topic"] == topic.name.encode()
    assert named["laneway.original.partition"] == b"0"
    assert named["laneway.original.offset"] == b"1"
    assert int(named["laneway.original.timestamp"] or b"0") > 0
    assert committed_all(topic, "g")


@pytest.mark.parametrize("source_kind", SOURCES)
@pytest.mark.parametrize("engine", ["thread", "async"])
def test_retries_back_off_hold_the_lane_and_let_other_keys_go_on(
    engine: str, source_kind: str, make_topic: Callable[[str, int], LogTopic]
) -> None:
    topic = make_topic(source_kind, 1)
    topic.produce([(b"flaky", b"0"), (b"flaky", b"1")] + [(b"other", b"x")] * 20)
    calls = Calls()
    attempts: dict[int, int] = defaultdict(int)

    def handle(m: Message) -> None:
        calls.add(m)
        if m.offset == 0:
            attempts[0] += 1
            if attempts[0] < 3:
                raise ConnectionError("try again")

    async def handle_async(m: Message) -> None:
        handle(m)

    consumer = laneway.Consumer(
        topic.source("g"),
        handle_async if engine == "async" else handle,
        engine=engine,
        concurrency=4,
        max_retries=3,
        retry_backoff=0.2,
        retry_backoff_max=1.0,
        handle_signals=False,
    )
    stats = consumer.run(max_messages=22)
    first, second, third = calls.of(0)
    assert second - first >= 0.1 and third - second >= 0.2, "no exponential backoff"
    assert calls.of(1)[0] > third, "the key's next message ran before its retried one finished"
    others = [t for k, _, t in calls.calls if k == b"other"]
    assert max(others) < third, "other keys waited for the backoff"
    assert stats.processed == 22 and stats.failed == 0
    assert committed_all(topic, "g")


@pytest.mark.parametrize("source_kind", SOURCES)
def test_on_failure_replaces_dead_letters_and_is_retried_until_it_succeeds(
    source_kind: str, make_topic: Callable[[str, int], LogTopic]
) -> None:
    topic = make_topic(source_kind, 2)
    topic.produce([(b"a", b"bad")] + [(str(i).encode(), b"ok") for i in range(50)])
    seen: list[tuple[int, str, int]] = []

    def on_failure(m: Message, failure: laneway.Failure) -> None:
        seen.append((m.offset, failure.error_type, failure.attempts))
        if len(seen) < 3:
            raise RuntimeError("alerting is down")

    def handle(m: Message) -> None:
        if m.value == b"bad":
            raise KeyError("no such account")

    consumer = laneway.Consumer(
        topic.source("g"),
        handle,
        max_retries=1,
        retry_backoff=0.01,
        on_failure=on_failure,
        handle_signals=False,
    )
    stats = consumer.run(max_messages=51)
    assert len(seen) == 3 and {s[1] for s in seen} == {"KeyError"} and seen[0][2] == 2
    assert stats.failed == 1 and stats.dead_lettered == 0 and stats.processed == 50
    assert topic.read(f"{topic.name}.dlq", 0) == []
    assert committed_all(topic, "g")


def test_an_unsettled_failure_holds_only_its_own_partition() -> None:
    topic = EmbeddedTopic(partitions=2)
    keys = {
        p: next(f"k{i}".encode() for i in range(99) if _partition(topic, i) == p) for p in (0, 1)
    }
    topic.produce([(keys[0], b"bad")] + [(keys[0], b"ok"), (keys[1], b"ok")] * 10)
    release = threading.Event()

    def on_failure(m: Message, failure: laneway.Failure) -> None:
        if not release.is_set():
            raise RuntimeError("not yet")

    def handle(m: Message) -> None:
        if m.value == b"bad":
            raise ValueError("x")

    consumer = laneway.Consumer(
        topic.source("g"),
        handle,
        max_retries=0,
        retry_backoff=0.02,
        retry_backoff_max=0.05,
        commit_interval=0.05,
        on_failure=on_failure,
        handle_signals=False,
    )
    threading.Timer(1.0, release.set).start()
    committed_meanwhile: dict[int, int] = {}

    def watch() -> None:
        time.sleep(0.7)
        committed_meanwhile.update({p: o for p, (o, _) in topic.committed("g").items()})

    watcher = threading.Thread(target=watch)
    watcher.start()
    consumer.run(max_messages=21)
    watcher.join()
    assert committed_meanwhile.get(1) == 10, "the healthy partition's commits were held up"
    assert committed_meanwhile.get(0, 0) == 0, "committed past an unsettled failure"
    assert committed_all(topic, "g")


def _partition(topic: EmbeddedTopic, i: int) -> int:
    from laneway.sources.embedded.partitioner import partition_for_key

    return partition_for_key(f"k{i}".encode(), 2)


@pytest.mark.parametrize("source_kind", SOURCES)
def test_a_poison_key_is_isolated_by_its_circuit(
    source_kind: str, make_topic: Callable[[str, int], LogTopic]
) -> None:
    topic = make_topic(source_kind, 1)
    topic.produce([(b"poison", b"x")] * 6 + [(b"fine", b"x")] * 5)
    calls = Calls()

    def handle(m: Message) -> None:
        calls.add(m)
        if m.key == b"poison":
            raise ValueError("cannot parse")

    consumer = laneway.Consumer(
        topic.source("g"),
        handle,
        engine="sync",
        max_retries=0,
        poison_threshold=2,
        poison_cooldown=60,
        poll_batch_size=1,
        handle_signals=False,
    )
    stats = consumer.run(max_messages=11)
    poison_runs = [c for c in calls.calls if c[0] == b"poison"]
    assert len(poison_runs) == 2, "the handler kept running a key whose circuit was open"
    assert stats.failed == 6 and stats.dead_lettered == 6 and stats.processed == 5
    letters = topic.read(f"{topic.name}.dlq", 6)
    types = sorted(dict(h)["laneway.error.type"] for _, _, h in letters)
    assert types == [b"CircuitOpen"] * 4 + [b"ValueError"] * 2
    assert committed_all(topic, "g")


def test_dead_letters_off_logs_and_commits(caplog: pytest.LogCaptureFixture) -> None:
    topic = EmbeddedTopic(partitions=1)
    topic.produce([(b"k", b"bad"), (b"k", b"ok")])

    def handle(m: Message) -> None:
        if m.value == b"bad":
            raise ValueError("boom")

    stats = laneway.Consumer(
        topic.source("g"), handle, max_retries=0, dead_letter_topic=None, handle_signals=False
    ).run(max_messages=2)
    assert stats.failed == 1 and stats.dead_lettered == 0
    assert "dropped (dead_letter_topic=None)" in caplog.text
    assert "orders.dlq" not in topic.log.topics()
    assert committed_all(topic, "g")


@pytest.mark.parametrize("source_kind", SOURCES)
def test_a_hanging_async_handler_times_out_and_is_dead_lettered(
    source_kind: str, make_topic: Callable[[str, int], LogTopic]
) -> None:
    topic = make_topic(source_kind, 1)
    topic.produce([(b"stuck", b"hang"), (b"other", b"ok"), (b"other", b"ok")])

    async def handle(m: Message) -> None:
        if m.value == b"hang":
            await asyncio.sleep(3600)

    started = time.monotonic()
    stats = laneway.Consumer(
        topic.source("g"),
        handle,
        engine="async",
        handler_timeout=0.2,
        max_retries=1,
        retry_backoff=0.01,
        handle_signals=False,
    ).run(max_messages=3)
    assert time.monotonic() - started < 10
    assert stats.processed == 2 and stats.failed == 1
    [(_, _, headers)] = topic.read(f"{topic.name}.dlq", 1)
    assert dict(headers)["laneway.error.type"] == b"TimeoutError"
    assert dict(headers)["laneway.error.message"] == b"the handler did not finish within 0.2 s"
    assert dict(headers)["laneway.attempts"] == b"2"


@pytest.mark.parametrize("engine", ["sync", "thread"])
def test_handler_timeout_is_refused_where_threads_cannot_be_interrupted(engine: str) -> None:
    topic = EmbeddedTopic(partitions=1)
    with pytest.raises(
        laneway.ConfigError, match=f"handler_timeout=1.0 is not valid with engine='{engine}'"
    ):
        laneway.Consumer(topic.source("g"), lambda m: None, engine=engine, handler_timeout=1.0)


@pytest.mark.parametrize(
    ("option", "value"),
    [
        ("max_retries", -1),
        ("retry_backoff", -0.1),
        ("retry_backoff_max", "1s"),
        ("handler_timeout", 0),
        ("dead_letter_topic", ""),
        ("dead_letter_topic", "{partition}.dlq"),
        ("poison_threshold", 0),
        ("poison_cooldown", 0),
        ("on_failure", "log"),
    ],
)
def test_invalid_failure_options_name_themselves(option: str, value: object) -> None:
    topic = EmbeddedTopic(partitions=1)
    with pytest.raises(laneway.ConfigError, match=f"{option}="):
        laneway.Consumer(
            topic.source("g"),
            lambda m: None,
            engine="async" if option == "handler_timeout" else "thread",
            **{option: value},
        )
