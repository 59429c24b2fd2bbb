"""A stateful call that changes state and returns nothing else keeps its change unlogged
(written to the changelog before the next commit, not with the call); once a call returns
results, every later change goes with its call's results, results first, so that no
change of a later message reaches the changelog while an earlier message of its key
waits for its results."""

from __future__ import annotations

from typing import Any

import pytest

from laneway.results import Produce
from laneway.state.codec import StateCodec
from laneway.state.handler import stateful
from laneway.state.records import change_of
from laneway.state.state import State
from laneway.state.table import PartitionTable
from laneway.types import Message

TOPIC, CHANGELOG = "in", "in.state"


def counting(message: Message, state: State[int]) -> Any:
    state.value = (state.value or 0) + 1
    return Produce("in.out", message.value) if message.value == b"result" else None


def wrapped(unlogged: bool = True, sync: bool = False) -> tuple[Any, PartitionTable]:
    table = PartitionTable(None, {}, 100)
    call = stateful(
        counting, {(TOPIC, 0): table}, StateCodec(None, CHANGELOG), CHANGELOG,
        typed=False, batched=False, is_async=False, unlogged=unlogged, on_control_thread=sync,
    )  # fmt: skip
    return call, table


@pytest.mark.parametrize("sync", [False, True], ids=["worker-thread", "control-thread"])
def test_a_change_without_results_is_kept_unlogged(sync: bool) -> None:
    call, table = wrapped(sync=sync)
    assert call(Message(TOPIC, 0, 0, b"a", b"v")) is None
    assert call(Message(TOPIC, 0, 1, b"a", b"v")) is None
    assert table.unlogged == {b"a": (b"2", 1)}
    assert table.get(b"a") == (b"2", 1)


def test_after_a_call_with_results_every_change_goes_with_its_call() -> None:
    call, table = wrapped()
    call(Message(TOPIC, 0, 0, b"a", b"v"))
    returned = call(Message(TOPIC, 0, 1, b"b", b"result"))
    assert [r.topic for r in returned] == ["in.out", CHANGELOG]
    later = call(Message(TOPIC, 0, 2, b"c", b"v"))
    assert change_of(later)[1:] == (b"c", b"1", 2)
    assert table.unlogged == {b"a": (b"1", 0)}  # taken before b's or c's record is written


def test_a_traced_consumer_writes_every_change_with_its_call() -> None:
    call, table = wrapped(unlogged=False)
    returned = call(Message(TOPIC, 0, 0, b"a", b"v"))
    assert change_of(returned)[1:] == (b"a", b"1", 0)
    assert table.unlogged == {}
