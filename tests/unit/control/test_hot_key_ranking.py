"""stats().hot_keys: a key holding messages off ranks first, even while it buffers little.

Pure logic: the containment with a recording stand-in for the source's rewind and for the
offset progress it declines through."""

from __future__ import annotations

from collections.abc import Iterable
from typing import cast

from laneway.control.skew.containment import Containment
from laneway.control.skew.counts import LaneCounts
from laneway.engines.lanes import lane_function
from laneway.offsets.progress import Progress
from laneway.options import Ordering
from laneway.sources.base import RewindingSource
from laneway.types import Message, PartitionId


class Declines:
    """What the containment declined, as the offset progress would hold it."""

    def __init__(self) -> None:
        self.first: dict[PartitionId, int] = {}

    def decline(self, messages: Iterable[Message]) -> None:
        for message in messages:
            pid = (message.topic, message.partition)
            self.first.setdefault(pid, message.offset)

    def declined(self) -> dict[PartitionId, tuple[int, int]]:
        return {pid: (first, first + 100) for pid, first in self.first.items()}


class Rewinds:
    def __init__(self) -> None:
        self.positions: list[dict[PartitionId, int]] = []

    def rewind(self, positions: dict[PartitionId, int]) -> None:
        self.positions.append(positions)


def message(key: bytes, offset: int) -> Message:
    return Message(topic="orders", partition=0, offset=offset, key=key, value=b"")


def containment(cap: int, rewinds: Rewinds) -> Containment:
    lane_of = lane_function(Ordering.KEY)
    assert lane_of is not None
    return Containment(
        cap,
        LaneCounts(lane_of),
        cast(Progress, Declines()),
        cast(RewindingSource, rewinds),
        clock=lambda: 1_000.0,
    )


def test_a_key_holding_messages_off_ranks_first_even_with_little_buffered() -> None:
    rewinds = Rewinds()
    contained = containment(4, rewinds)
    hot = [message(b"hot", offset) for offset in range(6)]
    cold = [message(b"cold-%d" % n, 10 + n) for n in range(3) for _ in range(3)]
    kept = contained.admit(hot + cold, buffered=100)
    assert [m.key for m in kept].count(b"hot") == 4, "the hot key is kept up to its cap"
    assert contained.declined == 2
    ranking = contained.hot_keys()
    assert (ranking[0].key, ranking[0].buffered, ranking[0].held_off) == (b"hot", 4, True)
    assert not any(key.held_off for key in ranking[1:])

    contained.settled(hot[:4])  # its kept messages are done; the held-off ones not yet back
    assert rewinds.positions == [{("orders", 0): 4}], "read again from the first held off"
    ranking = contained.hot_keys()
    assert (ranking[0].key, ranking[0].buffered, ranking[0].held_off) == (b"hot", 0, True)
    assert [key.key for key in ranking[1:]] == [b"cold-0", b"cold-1", b"cold-2"]

    contained.admit(hot[4:], buffered=100)  # the reading brings them back
    ranking = contained.hot_keys()
    assert (ranking[0].key, ranking[0].buffered, ranking[0].held_off) == (b"cold-0", 3, False)
    assert (b"hot", 2, False) in [(key.key, key.buffered, key.held_off) for key in ranking]
