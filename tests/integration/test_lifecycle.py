"""A handler's open() and close(): once per worker, around every message, on every engine."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import process_handlers
import pytest
from topics import SOURCES, EmbeddedTopic, LogTopic

import laneway
from laneway.engines.lifecycle import Lifecycle


@pytest.mark.parametrize("source_kind", SOURCES)
@pytest.mark.parametrize("engine", ["sync", "thread", "async", "process"])
def test_resources_are_opened_once_per_worker_and_closed_after_the_last_message(
    engine: str, source_kind: str, tmp_path: Path, make_topic: object
) -> None:
    topic: LogTopic = make_topic(source_kind, 4)  # type: ignore[operator]
    topic.produce([(b"k%d" % (i % 20), b"v") for i in range(400)])
    database = str(tmp_path / "resource.sqlite")
    writer_type = (
        process_handlers.AsyncSqliteWriter if engine == "async" else process_handlers.SqliteWriter
    )
    stats = laneway.Consumer(
        topic.source("lifecycle"),
        writer_type(database),
        engine=engine,
        concurrency=2 if engine != "sync" else None,
        handle_signals=False,
    ).run(max_messages=400)
    assert stats.processed == 400
    opens: list[int] = []
    seen: list[tuple[int, int]] = []
    for path in tmp_path.glob("resource.sqlite.*"):
        with sqlite3.connect(path) as db:
            opens += [pid for (pid,) in db.execute("SELECT pid FROM opens")]
            seen += db.execute("SELECT pid, COUNT(*) FROM seen GROUP BY pid").fetchall()
    assert len(opens) == len(set(opens)), "open() ran once per worker"
    assert len(opens) == (2 if engine == "process" else 1)
    assert {pid for pid, _ in seen} <= set(opens), "every message ran in an opened worker"
    assert sum(count for _, count in seen) == 400, "close() committed what the worker wrote"


def test_an_open_that_raises_stops_the_start_naming_the_handler(tmp_path: Path) -> None:
    topic = EmbeddedTopic(partitions=1)
    missing = str(tmp_path / "no-such-dir" / "db.sqlite")
    consumer = laneway.Consumer(
        topic.source("g"), process_handlers.SqliteWriter(missing), engine="process",
        concurrency=1, handle_signals=False,
    )  # fmt: skip
    with pytest.raises(
        laneway.LanewayError,
        match=r"could not start in a worker: .*open\(\) raised OperationalError",
    ):
        consumer.run(idle_timeout=1)


class OnlyOpen:
    def open(self) -> None:
        pass

    def __call__(self, message: laneway.Message) -> None:
        pass


class AsyncOpen:
    async def open(self) -> None:
        pass

    def close(self) -> None:
        pass

    def __call__(self, message: laneway.Message) -> None:
        pass


def test_half_a_lifecycle_or_an_async_open_on_a_thread_engine_is_refused() -> None:
    topic = EmbeddedTopic(partitions=1)
    with pytest.raises(laneway.ConfigError, match=r"has open\(\) but no close\(\)"):
        laneway.Consumer(topic.source("g"), OnlyOpen())
    with pytest.raises(laneway.ConfigError, match=r"'async def open\(\)' but only engine='async'"):
        laneway.Consumer(topic.source("g"), AsyncOpen(), engine="thread")
    assert Lifecycle.of(print) == Lifecycle()
