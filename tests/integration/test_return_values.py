"""A handler return value that is not ``None``, a ``Produce`` or a list of them (nor, from
a batch handler, ``Outcomes``) fails that message with a ``TypeError`` naming the type
returned and what is allowed: retried, then dead-lettered, on every engine.

Handlers are module-level so process-engine workers can import them by name.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from topics import EmbeddedTopic

import laneway
from laneway.results import Outcomes
from laneway.types import Message

ENGINES = ["sync", "thread", "async", "process"]
ALLOWED = b"return None, a laneway.Produce or a list of them"


def returns_str(message: Message) -> object:
    return "ok"


def returns_ints(message: Message) -> object:
    return [1, 2]


def returns_dict(message: Message) -> object:
    return {"done": True}


async def returns_str_async(message: Message) -> object:
    return "ok"


async def returns_ints_async(message: Message) -> object:
    return [1, 2]


async def returns_dict_async(message: Message) -> object:
    return {"done": True}


def batch_returns_str(messages: list[Message]) -> object:
    return "ok"


async def batch_returns_str_async(messages: list[Message]) -> object:
    return "ok"


def batch_outcome_str_for_offset_2(messages: list[Message]) -> object:
    return Outcomes(["ok" if m.offset == 2 else None for m in messages])


async def batch_outcome_str_for_offset_2_async(messages: list[Message]) -> object:
    return batch_outcome_str_for_offset_2(messages)


HANDLERS: dict[str, tuple[Callable[..., object], Callable[..., object], bytes]] = {
    "str": (returns_str, returns_str_async, b"the handler returned str 'ok'"),
    "list": (returns_ints, returns_ints_async, b"the handler returned a list holding int 1"),
    "dict": (returns_dict, returns_dict_async, b"the handler returned dict {'done': True}"),
}


def run(
    engine: str, handler: Callable[..., object], **options: object
) -> tuple[EmbeddedTopic, laneway.ConsumerStats]:
    topic = EmbeddedTopic(partitions=1)
    topic.produce([(b"k%d" % i, b"v") for i in range(5)])
    stats = laneway.Consumer(
        topic.source("g"),
        handler,
        engine=engine,
        max_retries=1,
        retry_backoff=0.001,
        handle_signals=False,
        **options,  # type: ignore[arg-type]
    ).run(max_messages=5, idle_timeout=30)
    return topic, stats


def dead_letters(topic: EmbeddedTopic, count: int) -> list[dict[str, bytes | None]]:
    return [dict(headers) for _, _, headers in topic.read("orders.dlq", count)]


@pytest.mark.parametrize("returned", sorted(HANDLERS))
@pytest.mark.parametrize("engine", ENGINES)
def test_a_return_value_not_allowed_fails_the_message(engine: str, returned: str) -> None:
    sync, coroutine, said = HANDLERS[returned]
    topic, stats = run(engine, coroutine if engine == "async" else sync)
    assert (stats.processed, stats.failed, stats.dead_lettered) == (0, 5, 5)
    letters = dead_letters(topic, 5)
    assert len(letters) == 5
    for named in letters:
        assert named["laneway.error.type"] == b"TypeError"
        assert named["laneway.attempts"] == b"2", "not retried like any failure"
        message = named["laneway.error.message"] or b""
        assert message.startswith(said) and message.endswith(ALLOWED)
    assert topic.committed("g") == {0: (5, "")}


@pytest.mark.parametrize("engine", ENGINES)
def test_a_batch_handler_returning_a_str_fails_its_messages(engine: str) -> None:
    handler = batch_returns_str_async if engine == "async" else batch_returns_str
    topic, stats = run(engine, handler, batch_size=5)
    assert (stats.processed, stats.failed, stats.dead_lettered) == (0, 5, 5)
    for named in dead_letters(topic, 5):
        assert named["laneway.error.type"] == b"TypeError"
        assert (named["laneway.error.message"] or b"").endswith(b"or laneway.Outcomes")


@pytest.mark.parametrize("engine", ENGINES)
def test_an_outcome_not_allowed_fails_its_message_alone(engine: str) -> None:
    sync, coroutine = batch_outcome_str_for_offset_2, batch_outcome_str_for_offset_2_async
    topic, stats = run(engine, coroutine if engine == "async" else sync, batch_size=5)
    assert (stats.processed, stats.failed, stats.dead_lettered) == (4, 1, 1)
    [named] = dead_letters(topic, 1)
    assert named["laneway.original.offset"] == b"2"
    assert named["laneway.error.type"] == b"TypeError"
    message = named["laneway.error.message"] or b""
    assert message.startswith(b"Outcomes[")  # its index in the batch of the last attempt
    assert b"]: the handler returned str 'ok'; return an exception, None" in message
