"""The process engine's per-message attempt counters (`Detacher.attempts`: timeouts and
deaths) forget a message once it is settled, so a long run does not keep every message that
ever timed out or lost its worker."""

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
        detacher.attempts.timeouts[("t", 0, offset)] += 1
    detacher.attempts.deaths[("t", 0, 1)] += 1
    harvest = Harvest()
    harvest.finished.append(message(1))
    harvest.failed.append(Failure(message(2), "TimeoutError", "timed out", 3))
    harvest.results.append(([message(3)], []))
    detacher.settle(harvest)
    assert dict(detacher.attempts.timeouts) == {("t", 0, 4): 1}, "only the unsettled one is kept"
    assert not detacher.attempts.deaths


def test_settling_with_nothing_counted_changes_nothing() -> None:
    detacher = Detacher(1, None, RetryPolicy())
    harvest = Harvest()
    harvest.finished.extend(message(offset) for offset in range(3))
    detacher.settle(harvest)
    assert not detacher.attempts.timeouts and not detacher.attempts.deaths


class DeadWorker:
    """What :meth:`Slot.bury` reads of a reaped worker: whether it had started."""

    ready = True


def test_a_message_s_worker_deaths_add_up_across_the_batches_it_is_sent_in() -> None:
    """A message handed back by a stuck worker is sent again in a new batch; the deaths
    of its workers count per message, so the third gives it up whichever batch it is in."""
    import multiprocessing
    from collections import deque

    from laneway.engines.attempts import BATCH_ID, INDEX
    from laneway.engines.process.slot import MAX_DEATHS, WORKER_DIED, Attempts, Batch, Slot

    poison = message(7)
    slot = Slot(0, deque(), multiprocessing.get_context("spawn"))
    attempts, policy = Attempts(), RetryPolicy()
    failed: list[Failure] = []
    for batch_id in range(1, MAX_DEATHS + 1):  # a new batch each time, the message first
        slot.outstanding.clear()
        slot.outstanding.append(Batch(batch_id, [poison, message(8)]))
        slot.progress[BATCH_ID], slot.progress[INDEX] = batch_id, 0
        failed = slot.bury(DeadWorker(), policy, attempts)  # type: ignore[arg-type]
        assert attempts.deaths[("t", 0, 7)] == batch_id
    assert [(f.message, f.error_type) for f in failed] == [(poison, WORKER_DIED)]
