"""A failed message's traceback shows its last failure once: retries run while the first
attempt's exception is being handled, and must not be chained to it."""

from __future__ import annotations

import logging
from typing import Any

import process_handlers
import pytest
from topics import EmbeddedTopic

import laneway
from laneway.retry import RetryPolicy, call
from laneway.types import Message

CHAINED = "During handling of the above exception, another exception occurred"


def always_fails(message: Message) -> None:
    raise ValueError(f"bad offset {message.offset}")


async def always_fails_async(message: Message) -> None:
    raise ValueError(f"bad offset {message.offset}")


def fails_with_its_own_cause(message: Message) -> None:
    try:
        {}["account"]
    except KeyError as missing:
        raise ValueError("no account") from missing


def test_retries_are_not_chained_to_the_first_attempt() -> None:
    message = Message("orders", 0, 7, b"k", b"v")
    error, attempts, _ = call(
        always_fails, message, RetryPolicy(max_retries=3, backoff=0.0), lambda s: True, id
    )
    assert attempts == 4 and error is not None
    traceback = error[3]
    assert traceback.count("Traceback (most recent call last)") == 1, traceback
    assert CHAINED not in traceback and "ValueError: bad offset 7" in traceback


def test_a_handlers_own_chain_stays() -> None:
    message = Message("orders", 0, 7, b"k", b"v")
    error, _, _ = call(
        fails_with_its_own_cause, message, RetryPolicy(max_retries=2), lambda s: True, id
    )
    assert error is not None
    traceback = error[3]
    assert "The above exception was the direct cause of the following exception" in traceback
    assert traceback.count("KeyError") == 1 and CHAINED not in traceback


HANDLERS: dict[str, Any] = {
    "sync": always_fails,
    "thread": always_fails,
    "async": always_fails_async,
    "process": process_handlers.fail_on_multiples_of_seven,
}


@pytest.mark.parametrize("engine", list(HANDLERS))
def test_the_dead_letter_error_line_and_header_show_the_traceback_once(
    engine: str, caplog: pytest.LogCaptureFixture
) -> None:
    topic = EmbeddedTopic(partitions=1)
    topic.produce([(b"k", b"v")])
    consumer = laneway.Consumer(
        topic.source("g"),
        HANDLERS[engine],
        engine=engine,  # type: ignore[arg-type]
        max_retries=2,
        retry_backoff=0.001,
        handle_signals=False,
    )
    with caplog.at_level(logging.ERROR, logger="laneway.dead_letters"):
        stats = consumer.run(max_messages=1, idle_timeout=5)
    assert stats.dead_lettered == 1
    [line] = [r.getMessage() for r in caplog.records if "dead-lettered" in r.getMessage()]
    assert line.count("Traceback (most recent call last)") == 1 and CHAINED not in line, line
    [(_, _, headers)] = topic.read(f"{topic.name}.dlq", 1)
    header = dict(headers)["laneway.error.traceback"].decode()
    assert header.count("Traceback (most recent call last)") == 1 and CHAINED not in header
