"""FairRelease: which dispatched message the engine gets next (pure logic: a fake engine
that records what it is handed, a fake clock)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection

from laneway.control.skew.release import LANE_AHEAD, STARVE_AFTER, FairRelease
from laneway.engines.lanes import by_key
from laneway.fairness import Fairness
from laneway.types import Message, PartitionId


class Recorder:
    """Just enough of an engine: remembers what it was handed, gives back on cancel."""

    def __init__(self) -> None:
        self.handed: list[Message] = []

    def submit(self, messages: list[Message]) -> None:
        self.handed += messages

    def cancel(self, partitions: Collection[PartitionId]) -> list[Message]:
        return []


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def tenant(message: Message) -> bytes:
    return (message.key or b"").split(b"-")[0]


def messages(keys: list[bytes], first: int = 0, partition: int = 0) -> list[Message]:
    return [Message("t", partition, first + i, k, b"") for i, k in enumerate(keys)]


def release(fairness: Fairness | None = None, priority: object = None, concurrency: int = 4):
    engine, clock = Recorder(), Clock()
    fair = FairRelease(engine, by_key, fairness, priority, concurrency, clock)  # type: ignore[arg-type]
    fair._window = 8  # a small window, so the choices show
    return fair, engine, clock


def test_groups_take_turns_by_weight_however_much_one_of_them_queued() -> None:
    fair, engine, _ = release(Fairness(tenant, weights={b"A": 1.0, b"B": 3.0}))
    flood = messages([b"A-%d" % (i % 50) for i in range(400)])
    quiet = messages([b"B-%d" % i for i in range(40)], first=400)
    fair.submit(flood + quiet)
    assert Counter(tenant(m) for m in engine.handed) == {b"A": 2, b"B": 6}


def test_a_lane_never_has_more_than_two_messages_out_and_keeps_its_order() -> None:
    fair, engine, _ = release()
    fair.submit(messages([b"hot"] * 20 + [b"cold-%d" % i for i in range(3)]))
    assert [m.key for m in engine.handed].count(b"hot") == LANE_AHEAD
    first = engine.handed[:]
    fair.settled(first[:1], [])  # hot's first message finished: its third may go
    hot = [m.offset for m in engine.handed if m.key == b"hot"]
    assert hot == sorted(hot) and len(hot) == LANE_AHEAD + 1


def test_the_higher_priority_starts_first_but_a_key_is_never_reordered() -> None:
    def priority(message: Message) -> int:
        return 9 if message.value == b"urgent" else 0

    fair, engine, _ = release(priority=priority)
    fair._window = 1
    batch = [
        Message("t", 0, 0, b"a", b""),
        Message("t", 0, 1, b"b", b""),
        Message("t", 0, 2, b"a", b"urgent"),  # behind a's first: cannot jump it
        Message("t", 0, 3, b"c", b"urgent"),
    ]
    fair.submit(batch)
    order = [engine.handed[-1].offset]
    for _ in range(3):
        fair.settled([engine.handed[-1]], [])
        order.append(engine.handed[-1].offset)
    assert order[0] == 3, "the urgent ready key went first"
    assert order.index(0) < order.index(2), "a's urgent message waited for a's first"


def test_a_low_priority_message_waits_at_most_the_starvation_bound() -> None:
    def priority(message: Message) -> int:
        return 0 if message.key == b"low" else 5

    fair, engine, clock = release(priority=priority)
    fair._window = 1
    fair.submit([Message("t", 0, 0, b"high-0", b"")])  # takes the window
    fair.submit([Message("t", 0, 1, b"low", b"")])  # waits for its turn
    offset = 2
    while engine.handed[-1].key != b"low" and clock.now < 60:
        fair.submit([Message("t", 0, offset, b"high-%d" % offset, b"")])  # always more
        offset += 1
        clock.now += 0.05
        fair.settled([engine.handed[-1]], [])
    assert engine.handed[-1].key == b"low"
    assert STARVE_AFTER <= clock.now <= STARVE_AFTER + 0.1
    assert offset > 90, "high-priority work went first meanwhile"


def test_a_group_at_its_in_flight_cap_waits_while_the_others_go() -> None:
    fair, engine, _ = release(Fairness(tenant, max_in_flight=2))
    fair.submit(messages([b"A-%d" % i for i in range(10)] + [b"B-%d" % i for i in range(10)]))
    assert Counter(tenant(m) for m in engine.handed) == {b"A": 2, b"B": 2}


def test_a_failure_halves_the_group_cap_and_calm_settlements_grow_it_back() -> None:
    fair, engine, _ = release(Fairness(tenant, max_in_flight=4))
    fair._window = 100
    fair.submit(messages([b"A-%d" % i for i in range(200)]))
    assert len(engine.handed) == 4
    failed = engine.handed[0]
    fair.settled([failed], [failed])  # it failed for good: the cap is now 2
    assert len(engine.handed) == 4, "no room under the halved cap"
    assert fair._groups[b"A"].allowed == 2
    done = {failed.offset}
    for _ in range(40):
        [next_one] = [m for m in engine.handed if m.offset not in done][:1]
        done.add(next_one.offset)
        fair.settled([next_one], [])
    assert fair._groups[b"A"].allowed == 3, "32 calm settlements grew the cap a step"
