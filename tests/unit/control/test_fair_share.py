"""FairShare: which partitions are paused while the buffer fills, and when they come back."""

from __future__ import annotations

import time
from collections.abc import Iterable

from laneway.control.backpressure import Backpressure
from laneway.control.fair_share import STARVE_HORIZON, FairShare
from laneway.offsets.partition import OwnedPartition
from laneway.offsets.progress import ProgressCounts
from laneway.types import PartitionId

MAX_BUFFERED = 800  # 4 partitions: a share of 200


class FakeSource:
    """Records pause/resume calls and answers ``unread`` from a fixed table."""

    def __init__(self, unread: dict[PartitionId, int] | None = None) -> None:
        self.paused: set[PartitionId] = set()
        self.calls: list[tuple[str, list[PartitionId]]] = []
        self._unread = unread or {}

    def pause(self, partitions: Iterable[PartitionId]) -> None:
        batch = sorted(partitions)
        self.calls.append(("pause", batch))
        self.paused.update(batch)

    def resume(self, partitions: Iterable[PartitionId]) -> None:
        batch = sorted(partitions)
        self.calls.append(("resume", batch))
        self.paused.difference_update(batch)

    def unread(self, partitions: Iterable[PartitionId]) -> dict[PartitionId, int]:
        return {p: self._unread.get(p, 0) for p in partitions}


def owned(*buffered: int) -> dict[PartitionId, OwnedPartition]:
    partitions: dict[PartitionId, OwnedPartition] = {}
    for index, count in enumerate(buffered):
        partition = OwnedPartition(None, 4096)
        partition.in_engine = count
        partitions[("t", index)] = partition
    return partitions


def room_left(partitions: dict[PartitionId, OwnedPartition]) -> int:
    return MAX_BUFFERED - sum(p.buffered for p in partitions.values())


def fair_share(source: FakeSource, drained_per_second: float | None) -> FairShare:
    fair = FairShare(source, MAX_BUFFERED)
    if drained_per_second is not None:
        now = time.monotonic()
        fair.drain.started(now - 1.0)
        fair.drain.finished(int(drained_per_second), now)
    return fair


def test_the_share_is_the_buffer_split_over_owned_partitions() -> None:
    fair = fair_share(FakeSource(), None)
    assert fair.share(4) == 200
    assert fair.share(0) == MAX_BUFFERED
    assert fair.share(10_000) == 1


def test_nothing_is_paused_while_the_buffer_is_nearly_empty() -> None:
    source = FakeSource(unread={("t", 1): 1_000})
    partitions = owned(49, 0, 0, 0)  # under 1/16 of 800
    fair_share(source, drained_per_second=1.0).balance(partitions, room_left(partitions), False)
    assert source.calls == []


def test_without_a_starving_partition_nothing_is_paused_under_half_full() -> None:
    source = FakeSource()
    partitions = owned(390, 0, 0, 0)
    fair_share(source, drained_per_second=1.0).balance(partitions, room_left(partitions), False)
    assert source.calls == []


def test_over_share_partitions_are_paused_from_half_full_and_resumed_under_three_quarters() -> None:
    source = FakeSource()
    fair = fair_share(source, drained_per_second=None)
    partitions = owned(250, 200, 0, 0)  # 450 of 800 in use
    fair.balance(partitions, room_left(partitions), False)
    assert source.paused == {("t", 0), ("t", 1)}

    partitions[("t", 0)].in_engine = 151  # above 3/4 of the share: stays paused
    partitions[("t", 1)].in_engine = 150
    fair.balance(partitions, room_left(partitions), False)
    assert source.paused == {("t", 0)}


def test_all_paused_partitions_come_back_once_seven_eighths_of_the_buffer_is_free() -> None:
    source = FakeSource()
    fair = fair_share(source, drained_per_second=None)
    partitions = owned(400, 0, 0, 0)
    fair.balance(partitions, room_left(partitions), False)
    assert source.paused == {("t", 0)}
    partitions[("t", 0)].in_engine = 100  # still at the share's half, but the buffer is empty
    fair.balance(partitions, room_left(partitions), False)
    assert source.paused == set()


def test_while_a_partition_starves_the_others_pause_at_a_quarter_share() -> None:
    partitions = owned(60, 49, 0, 0)  # a quarter share is 50
    slow = 109 / STARVE_HORIZON / 2  # finishing the 109 buffered takes twice the horizon
    source = FakeSource(unread={("t", 2): 500})
    fair = fair_share(source, drained_per_second=slow)
    fair.balance(partitions, room_left(partitions), False)
    assert fair.catching_up
    assert source.paused == {("t", 0)}
    assert fair.poll_limit(4) == 50  # and polls ask for a quarter share at a time

    partitions[("t", 0)].in_engine = 10  # under 3/4 of a share, but ("t", 2) still starves
    fair.balance(partitions, room_left(partitions), False)
    assert source.paused == {("t", 0)}

    partitions[("t", 2)].in_engine = 50  # it got its messages: normal rules again
    fair.balance(partitions, room_left(partitions), False)
    assert not fair.catching_up
    assert source.paused == set()
    assert fair.poll_limit(4) == 200


def test_no_pause_for_a_starving_partition_when_the_engine_drains_fast() -> None:
    partitions = owned(220, 0, 0, 0)
    fast = 220 / STARVE_HORIZON * 10
    source = FakeSource(unread={("t", 2): 500})
    fair_share(source, drained_per_second=fast).balance(partitions, room_left(partitions), False)
    assert source.calls == []


def test_a_few_unread_messages_are_not_a_backlog() -> None:
    partitions = owned(220, 0, 0, 0)
    source = FakeSource(unread={("t", 2): 49, ("t", 3): 3})  # under a quarter share each
    fair_share(source, drained_per_second=1.0).balance(partitions, room_left(partitions), False)
    assert source.calls == []


def test_empty_partitions_with_nothing_unread_are_not_starving() -> None:
    partitions = owned(220, 0, 0, 0)
    source = FakeSource(unread={})
    fair_share(source, drained_per_second=1.0).balance(partitions, room_left(partitions), False)
    assert source.calls == []


def test_while_everything_is_paused_it_only_keeps_count() -> None:
    source = FakeSource()
    fair = fair_share(source, drained_per_second=None)
    partitions = owned(400, 100, 0, 0)
    fair.balance(partitions, room_left(partitions), True)
    assert source.calls == []
    assert fair.over_share == {("t", 0)}
    assert fair.resumable(partitions) == [("t", 1), ("t", 2), ("t", 3)]
    fair.forget(("t", 0))
    assert fair.resumable(partitions) == list(partitions)


def test_a_partition_paused_here_is_not_starving_when_it_runs_dry() -> None:
    source = FakeSource(unread={("t", 0): 5_000})
    fair = fair_share(source, drained_per_second=1.0)  # slow
    partitions = owned(450, 0, 0, 0)
    fair.balance(partitions, room_left(partitions), False)
    assert source.paused == {("t", 0)}
    partitions[("t", 0)].in_engine = 0  # drained while paused; others still busy
    partitions[("t", 1)].in_engine = 150
    fair.balance(partitions, room_left(partitions), False)
    assert not fair.catching_up
    assert source.paused == set()  # resumed under three quarters of its share


class BufferedProgress:
    """The part of a Progress that Backpressure.next_turn reads, over ``owned`` partitions."""

    def __init__(self, partitions: dict[PartitionId, OwnedPartition]) -> None:
        self.partitions = partitions

    @property
    def counts(self) -> ProgressCounts:
        return ProgressCounts(buffered=sum(p.buffered for p in self.partitions.values()))

    def awaiting(self, now: float) -> int:
        return 0


def test_messages_waiting_only_for_their_results_are_no_partitions_share_of_work() -> None:
    # Handler results are written in rounds and their inputs stay buffered until the log
    # acknowledged them: half the buffer may be such inputs while the handlers keep up.
    # Pausing their partitions for that would drop the client's prefetch for nothing.
    partitions = owned(250, 200, 0, 0)  # 450 of 800 buffered
    progress = BufferedProgress(partitions)
    source = FakeSource()
    backpressure = Backpressure(
        source, MAX_BUFFERED, poll_batch_size=100, max_buffered_bytes=1 << 30
    )
    backpressure.arrived(0.0)
    backpressure.next_turn(progress, 0.0, writing=400)  # 50 messages of handler work
    assert source.calls == []

    backpressure.next_turn(progress, 0.0, writing=0)  # all 450 are work: the rule applies
    assert source.paused == {("t", 0), ("t", 1)}
