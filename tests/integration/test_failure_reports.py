"""What a user sees when handlers fail or hang: tracebacks, stalls, poison keys, timing."""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from typing import Any

import process_handlers
import pytest
from topics import SOURCES, EmbeddedTopic, LogTopic

import laneway
from laneway.types import Message


def parse_amount(message: Message) -> None:
    raise ValueError(f"bad amount in offset {message.offset}")


def handle_bad_amounts(message: Message) -> None:
    if message.value == b"bad":
        parse_amount(message)


@pytest.mark.parametrize("source_kind", SOURCES)
@pytest.mark.parametrize("engine", ["thread", "process"])
def test_the_final_failure_carries_its_traceback_to_the_log_and_the_dead_letter(
    source_kind: str,
    engine: str,
    make_topic: Callable[[str, int], LogTopic],
    caplog: pytest.LogCaptureFixture,
) -> None:
    topic = make_topic(source_kind, 1)
    topic.produce([(b"k", b"ok"), (b"k", b"bad"), (b"k", b"ok")])
    handler = process_handlers.fail_bad_amounts if engine == "process" else handle_bad_amounts
    with caplog.at_level(logging.DEBUG, logger="laneway"):
        stats = laneway.Consumer(
            topic.source("g"),
            handler,
            engine=engine,
            concurrency=2,
            max_retries=1,
            retry_backoff=0.001,
            handle_signals=False,
        ).run(max_messages=3)
    assert stats.failed == 1
    [(_, _, headers)] = topic.read(f"{topic.name}.dlq", 1)
    trace = dict(headers)["laneway.error.traceback"].decode()
    assert trace.startswith("Traceback (most recent call last):")
    assert "in parse_amount" in trace and "ValueError: bad amount in offset 1" in trace
    frames = [line for line in trace.splitlines() if line.startswith('  File "')]
    assert f"in {handler.__name__}" in frames[0], trace  # laneway's calling frames left out
    inside = [os.path.join("laneway", "engines", ""), os.path.join("laneway", "retry.py")]
    assert not [path for path in inside if path in trace], trace
    final = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert len(final) == 1 and "in parse_amount" in final[0].getMessage()
    assert "(key b'k')" in final[0].getMessage()
    if engine == "thread":  # process workers do not log to the parent
        retries = [
            r for r in caplog.records if r.levelno == logging.DEBUG and "retrying" in r.getMessage()
        ]
        assert len(retries) == 1 and retries[0].exc_info is not None


def test_a_traceback_is_cut_to_its_last_characters() -> None:
    from laneway.retry import MAX_TRACEBACK_TEXT, formatted_traceback

    try:
        raise ValueError("x" * 10_000 + " the end")
    except ValueError as error:
        text = formatted_traceback(error)
    assert len(text) == MAX_TRACEBACK_TEXT and text.rstrip().endswith("the end")


@pytest.mark.parametrize("engine", ["sync", "thread"])
def test_a_hung_handler_is_reported_as_stalled_and_then_released(
    engine: str, caplog: pytest.LogCaptureFixture
) -> None:
    topic = EmbeddedTopic(partitions=2)
    topic.produce([(b"stuck", b"hang"), (b"fine", b"ok")])
    release = threading.Event()

    def handle(message: Message) -> None:
        if message.value == b"hang":
            release.wait(30)

    consumer = laneway.Consumer(
        topic.source("g"), handle, engine=engine, stall_timeout=0.3, handle_signals=False
    )
    done: list[laneway.ConsumerStats] = []
    runner = threading.Thread(target=lambda: done.append(consumer.run(idle_timeout=0.5)))
    with caplog.at_level(logging.WARNING, logger="laneway"):
        runner.start()
        deadline = time.monotonic() + 10
        while not consumer.stats().stalled and time.monotonic() < deadline:
            time.sleep(0.05)
        stats = consumer.stats()
        health = consumer.health()
        release.set()
        runner.join(10)
    [stall] = stats.stalled
    assert (stall.key, stall.offset) == (b"stuck", 0) and stall.seconds >= 0.3
    assert stats.oldest_in_flight >= 0.3
    warnings = [r.getMessage() for r in caplog.records if "stall_timeout=0.3" in r.getMessage()]
    assert len(warnings) == 1, "one warning per stalled message"
    assert f"on orders[{stall.partition}]@0 (key b'stuck')" in warnings[0]
    assert done and done[0].handled == 2 and done[0].stalled == ()
    assert done[0].oldest_in_flight == 0.0
    assert health.live and not health.ready and health.state == "running"
    assert "longer than stall_timeout=0.3 s" in health.reason and "@0 for " in health.reason
    assert "stuck" not in health.reason, "a key is message data: not in the probe's reason"
    assert "key" not in health.as_json()["stalled"][0]
    assert health.as_json(keys=True)["stalled"][0]["key"] == "stuck"
    after = consumer.health()
    assert (after.live, after.ready, after.state) == (False, False, "stopped")


def run_poison_key(
    engine: str, poisoned: int, **options: Any
) -> tuple[list[bytes | None], laneway.ConsumerStats]:
    """``poisoned`` messages of a key whose handler always raises, then 20 of a fine key,
    through ``engine`` with ``poison_threshold=2``: the keys of the handler calls, in call
    order, and the run's stats."""
    topic = EmbeddedTopic(partitions=1)
    topic.produce([(b"poison", b"x")] * poisoned + [(b"fine", b"x")] * 20)
    calls: list[bytes | None] = []

    def handle(message: Message) -> None:
        calls.append(message.key)
        if message.key == b"poison":
            raise ValueError("cannot parse")

    async def handle_async(message: Message) -> None:
        handle(message)

    stats = laneway.Consumer(
        topic.source("g"),
        handle_async if engine == "async" else handle,
        engine=engine,
        poison_threshold=2,
        handle_signals=False,
        **options,
    ).run(max_messages=poisoned + 20)
    return calls, stats


@pytest.mark.parametrize("engine", ["thread", "async"])
def test_an_open_circuit_diverts_the_key_s_queued_messages(engine: str) -> None:
    # 300 messages of a poison key are fetched into its lane before its circuit opens;
    # once it opens, its queued messages are diverted: only those that started before the
    # control thread saw the second failure (a few, each ~10 ms of retry) still run.
    calls, stats = run_poison_key(engine, 300, max_retries=1, retry_backoff=0.01)
    poison_calls = calls.count(b"poison")
    assert poison_calls <= 2 * 20, f"{poison_calls} handler calls for a key whose circuit opened"
    assert stats.failed == 300 and stats.processed == 20 and stats.dead_lettered == 300


@pytest.mark.timing
@pytest.mark.parametrize("engine", ["thread", "async"])
def test_a_key_that_fails_at_once_runs_hardly_past_its_threshold(engine: str) -> None:
    # Without retries a poison message fails in microseconds: a worker reporting failures
    # only every few milliseconds ran ~100 of 200 before the control thread opened the
    # circuit. A final failure is reported at once and hands the control thread the GIL.
    # timing: how many run meanwhile depends on the control thread getting a core; with
    # three test sessions on two cores the async engine once ran 26 (Python 3.10 session).
    calls, stats = run_poison_key(
        engine, 200, max_retries=0, on_failure=lambda message, failure: None
    )
    assert calls.count(b"poison") <= 10, f"{calls.count(b'poison')} calls after threshold 2"
    assert stats.failed == 200 and stats.processed == 20


def test_elapsed_and_throughput_leave_out_the_idle_wait() -> None:
    topic = EmbeddedTopic(partitions=2)
    topic.produce([(b"k%d" % (i % 10), b"v") for i in range(2_000)])
    started = time.monotonic()
    stats = laneway.Consumer(
        topic.source("g"), lambda m: None, engine="sync", handle_signals=False
    ).run(idle_timeout=2.0)
    wall = time.monotonic() - started
    assert stats.handled == 2_000 and wall >= 2.0
    assert stats.elapsed < wall - 1.5
    assert stats.throughput == pytest.approx(2_000 / stats.elapsed)


def test_a_handler_that_cannot_take_one_message_fails_at_construction() -> None:
    def two(message: Message, extra: int) -> None:
        pass

    topic = EmbeddedTopic(partitions=1)
    with pytest.raises(
        laneway.ConfigError,
        match=r"handler .*\.two\(message, extra\) cannot be called with one message",
    ):
        laneway.Consumer(topic.source("g"), two)


def test_a_lambda_for_the_process_engine_fails_at_construction() -> None:
    topic = EmbeddedTopic(partitions=1)
    with pytest.raises(laneway.HandlerImportError, match="cannot be pickled"):
        laneway.Consumer(topic.source("g"), lambda m: None, engine="process")


def test_dir_shows_the_public_names() -> None:
    names = dir(laneway)
    for name in ("Consumer", "EmbeddedLog", "KafkaSource", "Message", "ConfigError"):
        assert name in names


def test_a_failure_inside_laneway_keeps_laneways_frames() -> None:
    from laneway.errors import ConfigError
    from laneway.options import whole_number
    from laneway.retry import formatted_traceback

    try:
        whole_number("x", "concurrency")
    except ConfigError as error:
        raised = error
    assert raised.__traceback__ is not None
    inside = raised.with_traceback(raised.__traceback__.tb_next)  # laneway's frames alone
    assert "in whole_number" in formatted_traceback(inside)
