"""Every invalid Consumer option fails at construction, naming the option and what is allowed."""

from __future__ import annotations

import asyncio
import re
import threading
from typing import Any

import pytest

import laneway
from laneway.types import Message


def handle(message: Message) -> None:
    pass


async def handle_async(message: Message) -> None:
    pass


@pytest.fixture
def source() -> Any:
    log = laneway.EmbeddedLog()
    log.create_topic("t", partitions=1)
    return log.subscribe(["t"], group="g")


@pytest.mark.parametrize(
    ("option", "value", "expected"),
    [
        ("engine", "fibers", "allowed values: 'sync', 'thread', 'async', 'process'"),
        ("ordering", "by-key", "allowed values: 'key', 'partition', 'unordered'"),
        ("concurrency", 0, "expected >= 1"),
        ("concurrency", 2.5, "expected a whole number"),
        ("concurrency", True, "expected a whole number"),
        ("max_buffered", 0, "expected >= 1"),
        ("max_buffered", "10", "expected a whole number"),
        ("commit_interval", 0, "expected seconds > 0"),
        ("commit_interval", float("nan"), "expected a number of seconds"),
        ("poll_batch_size", -5, "expected >= 1"),
        ("drain_timeout", -1, "expected seconds >= 0"),
        ("metadata_max_bytes", 10, "expected >= 64"),
        ("handle_signals", "yes", "expected True or False"),
        ("event_loop", "trio", "allowed values: 'auto', 'asyncio', 'uvloop'"),
    ],
)
def test_invalid_option_names_itself(
    source: Any, option: str, value: object, expected: str
) -> None:
    with pytest.raises(laneway.ConfigError, match=re.escape(f"{option}={value!r}")) as error:
        laneway.Consumer(source, handle, **{option: value})
    assert expected in str(error.value)


def test_sync_engine_refuses_concurrency_above_one(source: Any) -> None:
    with pytest.raises(laneway.ConfigError, match="concurrency=4 is not valid with engine='sync'"):
        laneway.Consumer(source, handle, engine="sync", concurrency=4)


def test_async_engine_needs_an_async_handler(source: Any) -> None:
    with pytest.raises(laneway.ConfigError, match="engine='async' needs an 'async def' handler"):
        laneway.Consumer(source, handle, engine="async")


@pytest.mark.parametrize("engine", ["sync", "thread", "process"])
def test_async_handler_needs_the_async_engine(source: Any, engine: str) -> None:
    with pytest.raises(laneway.ConfigError, match="use engine='async'"):
        laneway.Consumer(source, handle_async, engine=engine)


def test_handler_must_be_callable(source: Any) -> None:
    with pytest.raises(laneway.ConfigError, match="handler=42 is not valid"):
        laneway.Consumer(source, 42)  # type: ignore[arg-type]


def test_source_must_be_a_source() -> None:
    with pytest.raises(laneway.ConfigError, match=r"source=.* is not valid"):
        laneway.Consumer("127.0.0.1:9092", handle)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("argument", "value", "expected"),
    [("max_messages", 0, "max_messages=0"), ("idle_timeout", -2, "idle_timeout=-2")],
)
def test_invalid_run_arguments_name_themselves(
    source: Any, argument: str, value: object, expected: str
) -> None:
    consumer = laneway.Consumer(source, handle, handle_signals=False)
    with pytest.raises(laneway.ConfigError, match=expected):
        consumer.run(**{argument: value})


def test_a_consumer_runs_once(source: Any) -> None:
    consumer = laneway.Consumer(source, handle, handle_signals=False)
    consumer.run(idle_timeout=0.2)
    with pytest.raises(laneway.LanewayError, match="runs once"):
        consumer.run(idle_timeout=0.2)


def test_stop_from_another_thread_ends_run(source: Any) -> None:
    consumer = laneway.Consumer(source, handle, handle_signals=False)
    timer = threading.Timer(0.3, consumer.stop)
    timer.start()
    stats = consumer.run()
    timer.join()
    assert stats.processed == 0


@pytest.mark.parametrize("engine", ["sync", "thread", "process"])
def test_only_the_async_engine_takes_an_event_loop(source: Any, engine: str) -> None:
    with pytest.raises(
        laneway.ConfigError, match=f"event_loop='asyncio' is not valid with engine='{engine}'"
    ):
        laneway.Consumer(source, handle, engine=engine, event_loop="asyncio")


def test_uvloop_without_the_package_names_the_extra(
    source: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("laneway.config.running.uvloop_installed", lambda: False)
    with pytest.raises(laneway.ConfigError, match=re.escape("pip install 'laneway[uvloop]'")):
        laneway.Consumer(source, handle_async, engine="async", event_loop="uvloop")


def test_run_async_refuses_an_explicit_event_loop(source: Any) -> None:
    consumer = laneway.Consumer(source, handle_async, engine="async", event_loop="asyncio")
    with pytest.raises(
        laneway.ConfigError, match=re.escape("event_loop='asyncio' applies to run()")
    ):
        asyncio.run(consumer.run_async(max_messages=1))
