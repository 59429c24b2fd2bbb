"""Misbehaving handlers: each case has one defined outcome (embedded log; the source
plays no part in it).

* A handler's return value other than ``None``, a ``Produce`` or a list of them (ints,
  arbitrary objects) fails the attempt with a ``TypeError`` naming it, and the message is
  retried, then dead-lettered (more cases in ``test_return_values.py``). So does an
  awaitable returned by a *sync* handler (an ``async`` call without its ``await``): its
  body would never run, and the ``TypeError`` says so; never silently "done".
* A handler raising any ``BaseException`` (``SystemExit``, ``GeneratorExit``, a custom
  subclass) fails that attempt: it is retried, then dead-lettered, and the consumer goes
  on. ``KeyboardInterrupt`` raised by a handler anywhere but the main thread (thread,
  async and process engines, or the sync engine run from another thread) fails the
  message at once, without retries, and is dead-lettered too. On the main thread (the
  sync engine's handler runs where ``run()`` was called) it stops the consumer like
  Ctrl-C: ``run()`` re-raises it and the message is not committed.
* A process-engine handler that hangs past ``handler_timeout`` has its worker replaced;
  the message is retried, then dead-lettered as ``TimeoutError``; other workers go on.
  (The async engine's case is in ``test_failures.py``.)

Handlers are module-level so process-engine workers can import them by name.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import recording
from chaos_harness import run_bounded
from topics import EmbeddedTopic

import laneway
from laneway.types import Message

GROUP = "malformed"

# -- handlers (importable by worker processes) -----------------------------------------


def _mark(name: str) -> None:
    (Path(os.environ[recording.RECORD_DIR]) / f"{name}-{os.getpid()}").touch()


def returns_int(message: Message) -> object:
    return 42


def returns_object(message: Message) -> object:
    return object()


async def _body_of_a_coroutine(message: Message) -> None:
    _mark("coroutine-ran")


def returns_coroutine(message: Message) -> object:
    return _body_of_a_coroutine(message)


async def returns_int_async(message: Message) -> object:
    return 42


async def returns_object_async(message: Message) -> object:
    return object()


class CustomStop(BaseException):
    """A BaseException subclass of the application's own."""


RAISED: dict[bytes, type[BaseException]] = {
    b"SystemExit": SystemExit,
    b"GeneratorExit": GeneratorExit,
    b"KeyboardInterrupt": KeyboardInterrupt,
    b"CustomStop": CustomStop,
}


def raise_by_value(message: Message) -> None:
    """Raises the BaseException named by the value (``b"ok"``: returns)."""
    raised = RAISED.get(message.value or b"")
    if raised is not None:
        raise raised("malformed")


async def raise_by_value_async(message: Message) -> None:
    raise_by_value(message)


def hang_or_record(message: Message) -> None:
    """Hangs for an hour on ``b"hang"``; records every other message."""
    if message.value == b"hang":
        _mark("hang")
        time.sleep(3600)
    recording.handle(message)


# -- helpers ---------------------------------------------------------------------------


@pytest.fixture
def record_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv(recording.RECORD_DIR, str(tmp_path))
    return tmp_path


def committed_all(topic: EmbeddedTopic) -> bool:
    return {p: o for p, (o, _) in topic.committed(GROUP).items()} == topic.end_offsets()


def consume(
    engine: str, handler: Callable[[Message], object], count: int, **options: Any
) -> tuple[EmbeddedTopic, laneway.ConsumerStats]:
    """Run ``handler`` on ``count`` messages of 5 keys over 2 partitions with ``engine``."""
    topic = EmbeddedTopic(partitions=2)
    topic.produce([(f"k{i % 5}".encode(), b"v") for i in range(count)])
    consumer = laneway.Consumer(
        topic.source(GROUP),
        handler,
        engine=engine,
        concurrency=2 if engine in ("thread", "process") else None,
        handle_signals=False,
        **options,
    )
    return topic, run_bounded(consumer, count)


# -- return values ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("engine", "handler"),
    [
        (engine, handler)
        for engine in ("sync", "thread", "process")
        for handler in (returns_int, returns_object)
    ]
    + [("async", returns_int_async), ("async", returns_object_async)],
)
def test_other_return_values_fail_the_message(
    engine: str, handler: Callable[[Message], object], record_dir: Path
) -> None:
    topic, stats = consume(engine, handler, 40, max_retries=0)
    assert (stats.processed, stats.failed, stats.dead_lettered) == (0, 40, 40)
    assert committed_all(topic)
    [(_, _, headers)] = topic.read("orders.dlq", 1)[:1]
    named = dict(headers)
    assert named["laneway.error.type"] == b"TypeError"
    assert b"the handler returned " in (named["laneway.error.message"] or b"")


@pytest.mark.filterwarnings("error::RuntimeWarning")  # the coroutine is closed, not leaked
@pytest.mark.parametrize("engine", ["sync", "thread", "process"])
def test_a_coroutine_returned_by_a_sync_handler_fails_the_message(
    engine: str, record_dir: Path
) -> None:
    topic, stats = consume(engine, returns_coroutine, 10, max_retries=1, retry_backoff=0.01)
    assert (stats.processed, stats.failed, stats.dead_lettered) == (0, 10, 10)
    assert committed_all(topic)
    letters = topic.read("orders.dlq", 10)
    assert len(letters) == 10
    for _, _, headers in letters:
        named = dict(headers)
        assert named["laneway.error.type"] == b"TypeError"
        assert b"engine='async'" in named["laneway.error.message"]
        assert named["laneway.attempts"] == b"2"
    assert list(record_dir.glob("coroutine-ran-*")) == [], "a returned coroutine was run"


# -- BaseException subclasses ----------------------------------------------------------


@pytest.mark.parametrize("raised", [name.decode() for name in RAISED])
@pytest.mark.parametrize("engine", ["sync", "thread", "async", "process"])
def test_base_exceptions_fail_the_message_not_the_consumer(engine: str, raised: str) -> None:
    topic = EmbeddedTopic(partitions=1)
    records = [(b"k", b"ok"), (b"k", raised.encode()), (b"k", b"ok")] + [(b"other", b"ok")] * 5
    topic.produce(records)
    consumer = laneway.Consumer(
        topic.source(GROUP),
        raise_by_value_async if engine == "async" else raise_by_value,
        engine=engine,
        concurrency=1 if engine == "sync" else 2,
        max_retries=2,
        retry_backoff=0.01,
        drain_timeout=2.0,
        handle_signals=False,
    )
    if engine == "sync" and raised == "KeyboardInterrupt":
        # On the main thread (where pytest runs tests) Ctrl-C must still stop the program.
        with pytest.raises(KeyboardInterrupt):
            consumer.run(max_messages=len(records), idle_timeout=20)
        assert topic.committed(GROUP).get(0, (0, ""))[0] <= 1, "committed the interrupted one"
        assert topic.read("orders.dlq", 0) == []
        return
    stats = run_bounded(consumer, len(records))
    assert (stats.processed, stats.failed, stats.dead_lettered) == (7, 1, 1)
    [(key, value, headers)] = topic.read("orders.dlq", 1)
    assert (key, value) == (b"k", raised.encode())
    named = dict(headers)
    assert named["laneway.error.type"] == raised.encode()
    assert named["laneway.attempts"] == (b"1" if raised == "KeyboardInterrupt" else b"3")
    assert committed_all(topic)


# -- a hanging process-engine handler --------------------------------------------------


def test_a_hanging_process_handler_times_out_and_other_workers_go_on(record_dir: Path) -> None:
    topic = EmbeddedTopic(partitions=1)
    records = [(b"stuck", b"hang")] + [(f"key-{i % 20}".encode(), b"5") for i in range(200)]
    topic.produce(records)
    consumer = laneway.Consumer(
        topic.source(GROUP),
        hang_or_record,
        engine="process",
        concurrency=2,
        handler_timeout=1.0,
        max_retries=1,
        retry_backoff=0.01,
        handle_signals=False,
    )
    stats = run_bounded(consumer, len(records))
    assert (stats.processed, stats.failed, stats.dead_lettered) == (200, 1, 1)
    assert stats.worker_restarts == 2, "each timed-out attempt replaces its worker"
    [(key, _, headers)] = topic.read("orders.dlq", 1)
    assert key == b"stuck"
    assert dict(headers)["laneway.error.type"] == b"TimeoutError"
    assert dict(headers)["laneway.attempts"] == b"2"
    hung = {int(p.name.rsplit("-", 1)[1]) for p in record_dir.glob("hang-*")}
    first_hang = min(p.stat().st_mtime for p in record_dir.glob("hang-*"))
    calls = recording.read_calls(record_dir)
    others = [c for c in calls if c.pid not in hung]
    assert others, "no message ran on the worker that did not hang"
    wall_offset = time.time() - time.monotonic()
    during = [c for c in others if first_hang < c.end + wall_offset < first_hang + 1.0]
    assert during, "the other worker waited for the hanging one"
    assert recording.duplicates(calls) == 0
    assert committed_all(topic)
