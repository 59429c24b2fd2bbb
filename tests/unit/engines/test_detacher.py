"""The process engine's per-message attempt counters (`Detacher.timeouts` and its deaths)
forget a message once it is settled, so a long run does not keep every message that ever
timed out or lost its worker."""

from __future__ import annotations

from laneway.engines.process.detaching import Detacher
from laneway.engines.process.slot import Harvest
from laneway.retry import RetryPolicy
from laneway.types import Failure, Message


def message(offset: int) -> Message:
    return Message("t", 0, offset, b"k", b"")


def test_settled_messages_leave_the_attempt_counters() -> None:
    detacher = Detacher(1, None, RetryPolicy(max_retries=2, timeout=1.0))
    for offset in (1, 2, 3, 4):
        detacher.timeouts[("t", 0, offset)] += 1
    harvest = Harvest()
    harvest.finished.append(message(1))
    harvest.failed.append(Failure(message(2), "TimeoutError", "timed out", 3))
    harvest.results.append(([message(3)], []))
    detacher.settle(harvest)
    assert dict(detacher.timeouts) == {("t", 0, 4): 1}, "only the unsettled message is kept"


def test_settling_with_nothing_counted_changes_nothing() -> None:
    detacher = Detacher(1, None, RetryPolicy())
    harvest = Harvest()
    harvest.finished.extend(message(offset) for offset in range(3))
    detacher.settle(harvest)
    assert not detacher.timeouts
