"""A shutdown whose drain ends before the handlers do says so.

The drain timeout (or a second signal, or ``stop(drain=False)``) abandons the messages
still running: one ERROR names each (topic, partition, offset; never key or value) and
says its offset stays uncommitted; ``run()`` counts them in ``stats.abandoned``;
``laneway run`` exits with code 7 (before: exit 0, which the docs call a clean drain).
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import threading
import time
from collections.abc import Callable
from pathlib import Path

import lifecycle_app
import pytest
from kafka_helpers import unique_name
from lifecycle_app import lines
from service_runs import SUPPORT, Service, wait_until
from topics import KafkaTopic

import laneway
from laneway.service import exits
from laneway.testing import ConsumerRunner

SECRET_KEY, SECRET_VALUE = b"acct-4711@example.com", b"slow"


def slow_handler(started: threading.Event, release: threading.Event) -> laneway.SyncHandler:
    def handle(message: laneway.Message) -> None:
        if message.value == SECRET_VALUE:
            started.set()
            release.wait(10.0)

    return handle


def handler_for(engine: str, out: Path) -> tuple[laneway.Handler, Callable[[], bool]]:
    """A handler on which the message of value ``SECRET_VALUE`` runs for 10 s, and a
    check that it started."""
    if engine == "process":  # a worker process: it says so in a file
        return lifecycle_app.handler, lambda: any(
            line[0] == "start" and line[3] == "1" for line in lines(out, "handled.log")
        )
    started = threading.Event()
    if engine == "async":

        async def handle(message: laneway.Message) -> None:
            if message.value == SECRET_VALUE:
                started.set()
                await asyncio.sleep(10.0)

        return handle, started.is_set
    return slow_handler(started, threading.Event()), started.is_set


@pytest.mark.parametrize("engine", ["thread", "async", "process"])
def test_a_drain_that_times_out_names_the_abandoned_messages(
    engine: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("LIFECYCLE_DIR", str(tmp_path))
    monkeypatch.setenv("LIFECYCLE_SLOW_S", "10")
    handler, started = handler_for(engine, tmp_path)
    with laneway.EmbeddedLog() as log:
        log.create_topic("orders", partitions=1)
        log.produce("orders", value=b"fast", key=b"a")
        log.produce("orders", value=SECRET_VALUE, key=SECRET_KEY)
        log.produce("orders", value=b"fast", key=b"b")
        consumer = laneway.Consumer(
            log.subscribe(["orders"], "billing"),
            handler,
            engine=engine,  # type: ignore[arg-type]
            drain_timeout=0.3,
            handle_signals=False,
        )
        result: list[laneway.ConsumerStats] = []
        runner = threading.Thread(target=lambda: result.append(consumer.run()))
        with caplog.at_level(logging.ERROR, logger="laneway"):
            runner.start()
            wait_until(started, 30, "the slow message to start")
            time.sleep(0.2)  # the stall watch's look: the message is seen running
            began = time.monotonic()
            consumer.stop()
            runner.join(10)
            stopped_after = time.monotonic() - began
        committed = log.committed("billing", "orders")

    [stats] = result
    assert stats.abandoned >= 1  # the slow one (and, queued behind it, the next)
    assert stopped_after < 3.0
    [error] = [r for r in caplog.records if "unfinished" in r.getMessage()]
    text = error.getMessage()
    assert error.levelno == logging.ERROR
    assert "orders[0]@1 (for" in text and "uncommitted" in text and "drain_timeout=0.3 s" in text
    assert SECRET_KEY.decode() not in text and "slow" not in text
    assert committed[0].offset == 1  # the abandoned message runs again after a restart


def test_a_clean_drain_abandons_nothing(caplog: pytest.LogCaptureFixture) -> None:
    with laneway.EmbeddedLog() as log:
        log.create_topic("orders", partitions=2)
        for i in range(20):
            log.produce("orders", value=b"v", key=f"k{i}".encode())
        consumer = laneway.Consumer(
            log.subscribe(["orders"], "billing"),
            lambda m: time.sleep(0.01),
            handle_signals=False,
        )
        with caplog.at_level(logging.ERROR, logger="laneway"):
            stats = consumer.run(max_messages=20)
    assert stats.abandoned == 0
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]


def test_stop_without_drain_abandons_at_once() -> None:
    started, release = threading.Event(), threading.Event()
    with laneway.EmbeddedLog() as log:
        log.create_topic("orders")
        log.produce("orders", value=SECRET_VALUE)
        consumer = laneway.Consumer(
            log.subscribe(["orders"], "billing"),
            slow_handler(started, release),
            drain_timeout=30,
            handle_signals=False,
        )
        result: list[laneway.ConsumerStats] = []
        runner = threading.Thread(target=lambda: result.append(consumer.run()))
        runner.start()
        assert started.wait(10)
        began = time.monotonic()
        consumer.stop(drain=False)
        runner.join(10)
        release.set()
    assert time.monotonic() - began < 3.0
    assert result[0].abandoned == 1


def test_the_testing_plugin_timeout_bounds_the_whole_run() -> None:
    release = threading.Event()
    with laneway.EmbeddedLog() as log:
        runner = ConsumerRunner(log)
        began = time.monotonic()
        with pytest.raises(AssertionError, match="abandoned 1 unfinished"):
            runner(lambda m: release.wait(20), ["x"], timeout=0.5, drain_timeout=20)
        took = time.monotonic() - began
        release.set()
    assert took < 3.0  # not timeout + drain_timeout


def test_laneway_run_exits_7_when_the_drain_times_out(tmp_path: Path) -> None:
    log_dir, out = tmp_path / "log", tmp_path / "out"
    out.mkdir()
    with laneway.EmbeddedLog(log_dir) as log:
        log.create_topic("orders")
        log.produce("orders", value=b"fast", key=b"a")
        log.produce("orders", value=SECRET_VALUE, key=SECRET_KEY)
    service = Service(
        tmp_path,
        "lifecycle_app:handler",
        [SUPPORT],
        env={"LIFECYCLE_DIR": str(out), "LIFECYCLE_SLOW_S": "30"},
    )
    process = service.start(
        *("--log-dir", str(log_dir), "--topic", "orders", "--group", "billing"),
        "--drain-timeout",
        "0.5",
    )
    wait_until(
        lambda: ["start", str(process.pid), "0", "1"] in lines(out, "handled.log"),
        30,
        "the slow message to start",
    )
    os.kill(process.pid, signal.SIGTERM)
    output, _ = process.communicate(timeout=30)

    assert process.returncode == exits.ABANDONED == 7, output
    assert "orders[0]@1" in output and "uncommitted" in output
    assert SECRET_KEY.decode() not in output
    with laneway.EmbeddedLog(log_dir) as log:
        assert log.committed("billing", "orders")[0].offset == 1


def test_laneway_run_exits_0_after_a_clean_drain(tmp_path: Path) -> None:
    log_dir, out = tmp_path / "log", tmp_path / "out"
    out.mkdir()
    with laneway.EmbeddedLog(log_dir) as log:
        log.create_topic("orders")
        log.produce("orders", value=b"fast")
    service = Service(tmp_path, "lifecycle_app:handler", [SUPPORT], env={"LIFECYCLE_DIR": str(out)})
    process = service.start("--log-dir", str(log_dir), "--topic", "orders", "--group", "billing")
    wait_until(lambda: len(lines(out, "handled.log")) == 2, 30, "the message to be handled")
    os.kill(process.pid, signal.SIGTERM)
    output, _ = process.communicate(timeout=30)
    assert process.returncode == exits.OK, output
    assert "unfinished" not in output


@pytest.mark.kafka
@pytest.mark.timing
def test_a_stop_with_a_hung_handler_on_kafka_takes_one_drain_timeout(kafka_bootstrap: str) -> None:
    # Before: closing the Kafka source revokes its partitions, and the revocation drained
    # the same hung message for another drain_timeout: 21.7 s at the default 10 s.
    topic = KafkaTopic(kafka_bootstrap, 1)
    topic.produce([(SECRET_KEY, SECRET_VALUE)])
    started, release = threading.Event(), threading.Event()
    consumer = laneway.Consumer(
        topic.source(unique_name("hung-stop")),
        slow_handler(started, release),
        engine="thread",
        drain_timeout=3.0,
        handle_signals=False,
    )
    result: list[laneway.ConsumerStats] = []
    runner = threading.Thread(target=lambda: result.append(consumer.run()))
    runner.start()
    try:
        assert started.wait(30)
        began = time.monotonic()
        consumer.stop()
        runner.join(30)
        took = time.monotonic() - began
    finally:
        release.set()
    assert result and result[0].abandoned == 1
    assert 3.0 <= took < 5.5, f"the stop took {took:.1f} s for drain_timeout=3"
