"""Entries: listed objects become JSON field by field, so a field added to a stall (or a hot
key) shows up on the page without a change; keys only when allowed."""

from __future__ import annotations

from dataclasses import dataclass

from laneway.status.entries import entries
from laneway.types import Stall, Waiting


def test_every_field_is_shown_and_the_key_only_when_allowed() -> None:
    waiting = Waiting(4, 2, (b"alice@example.com", b"bob"), (("orders", 3),))
    stall = Stall("orders", 3, 17, b"alice@example.com", 2.50049, waiting, 9)
    assert entries([stall], show_keys=False) == [
        {
            "topic": "orders",
            "partition": 3,
            "offset": 17,
            "seconds": 2.5,
            "waiting": {"messages": 4, "keys": 2, "partitions": ["orders[3]"]},
            "held_back": 9,
        }
    ]
    [shown] = entries([stall], show_keys=True)
    assert shown["key"] == "alice@example.com"
    assert shown["waiting"]["names"] == ["alice@example.com", "bob"]


@dataclass(frozen=True)
class WiderStall:
    """A stall as issue 38 extends it: how many keys and which partitions wait behind it."""

    topic: str
    partition: int
    offset: int
    key: bytes | None
    seconds: float
    keys_waiting: int
    partitions_waiting: tuple[tuple[str, int], ...]


@dataclass(frozen=True)
class HotKey:
    key: bytes
    buffered: int
    share: float


def test_fields_added_later_show_up_and_partitions_read_as_topic_and_number() -> None:
    wider = WiderStall("orders", 1, 9, b"k", 3.0, 12, (("orders", 1), ("orders", 4)))
    [shown] = entries([wider], show_keys=False)
    assert shown["keys_waiting"] == 12
    assert shown["partitions_waiting"] == ["orders[1]", "orders[4]"]
    assert "key" not in shown


def test_a_hot_key_is_counted_without_its_name_unless_allowed() -> None:
    hot = HotKey(b"\xff\xfeacct", 420, 0.6)
    assert entries([hot], show_keys=False) == [{"buffered": 420, "share": 0.6}]
    assert entries([hot], show_keys=True)[0]["key"] == "\\xff\\xfeacct"
