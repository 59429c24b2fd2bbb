"""Claims: the lane runs one worker of the thread or async engine takes at once.

A worker that goes to the scheduler for work takes the run of one ready lane and, while
handlers are quick, the runs of further ready lanes with it (see
:meth:`~laneway.engines.lanes.LaneScheduler.claim_lanes`), about ``WORK_PER_CLAIM``
seconds of work by the handler's recent cost (:class:`HandlerCost`). With many keys a
lane holds a message or two per fetch, and a claim per lane (a lock round trip for a
thread, a wake-up for a coroutine) cost more than the handlers: with 10,000 keys the
thread engine ran at a twelfth of the sync engine's rate.

A :class:`Claim` is consumed like a single run: one deque its worker pops from the left,
lane after lane, each lane's messages in offset order; its lanes stay busy until the
worker is done with the claim. So that a message that turns out slow holds up only its
own lane, a claim running longer than ``GIVE_BACK_AFTER`` gives its unstarted messages
back (:func:`take_back`, from the engine's watcher): they are popped from the right
(each message goes to exactly one side), put back at the front of their lanes, and every
lane of the claim is released except the one whose message the worker may be running.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Collection, Hashable, Iterable

from laneway.engines.lanes import LaneScheduler, steal, unstarted
from laneway.types import Message, PartitionId, Waiting, waiting_of

WORK_PER_CLAIM = 0.001
"""Seconds of handler work (by the recent cost per message) one claim takes at most,
beyond its first lane's run: the other lanes of a claim wait about this long."""
GIVE_BACK_AFTER = 0.005
"""Seconds a claim of several lanes runs before its unstarted messages are given back."""
COST_SAMPLES = 16
"""Recent claims whose cost per message the estimates are taken from."""


class HandlerCost:
    """The handler's cost per message, from the last ``COST_SAMPLES`` claims: :attr:`low`,
    the lower quartile of their seconds per message, because a claim that was preempted,
    or queued for the GIL behind many threads, can take a thousand times its usual time
    (an average, or the mean cost, would then wake ever more threads, and shrink claims
    to a lane or two, where the lock round trips cost most). A handler that is quick but
    now and then slow still gets large claims; the watcher's :func:`take_back` is what
    keeps its slow messages from holding up other keys.
    """

    def __init__(self, max_run: int) -> None:
        self._max_run = max_run
        self._samples: deque[tuple[float, int]] = deque(maxlen=COST_SAMPLES)
        self.low: float | None = None
        """Seconds per message, the lower quartile of recent claims (``None``: not yet)."""

    def record(self, seconds: float, messages: int) -> None:
        """A claim ran ``messages`` messages in ``seconds``."""
        if messages <= 0:
            return
        samples = self._samples
        samples.append((seconds, messages))
        per_message = sorted(spent / count for spent, count in samples)
        self.low = per_message[len(per_message) // 4]

    def claim_size(self) -> int:
        """How many messages the next claim may take beyond its first lane's run."""
        low = self.low
        if low is None:
            return 1
        if low <= 0.0:
            return self._max_run
        return max(1, min(self._max_run, int(WORK_PER_CLAIM / low)))


class Claim:
    """The runs of the lanes one worker claimed at once, consumed as one :attr:`run`."""

    __slots__ = ("lanes", "messages", "returned", "run", "started")

    def __init__(self, claimed: list[tuple[Hashable, list[Message]]], now: float) -> None:
        self.lanes = [lane for lane, _ in claimed]
        """The lanes this claim holds busy (its worker releases them when done)."""
        self.messages = claimed[0][1] if len(claimed) == 1 else [m for _, r in claimed for m in r]
        """Every message claimed, in the order the worker runs them."""
        self.run = deque(self.messages)
        self.started = now
        self.returned = 0
        """Messages taken out of :attr:`run` unstarted (given back, or revoked)."""

    def ran(self) -> int:
        """Messages its worker took from :attr:`run` (so far)."""
        return len(self.messages) - self.returned - len(self.run)


def take_back_slow(claims: Iterable[Claim], scheduler: LaneScheduler, now: float) -> int:
    """:func:`take_back` from every claim that still holds several lanes and has run
    ``GIVE_BACK_AFTER`` seconds or more by ``now``; how many lanes it released (wake
    workers for them when any). A claim whose messages have all started is taken back
    too: its lanes other than the one in hand are released, or a lane whose messages
    finished early in the claim would wait behind a later call of it that hangs. Call
    from the engine's watcher, with its lock held, in an ordered mode."""
    released = 0
    for claim in claims:
        if len(claim.lanes) > 1 and now - claim.started >= GIVE_BACK_AFTER:
            held = len(claim.lanes)
            take_back(claim, scheduler)
            released += held - len(claim.lanes)
    return released


def take_back(claim: Claim, scheduler: LaneScheduler) -> int:
    """Give the unstarted messages of ``claim`` back to ``scheduler``, at the front of
    their lanes, and release every lane of the claim but the one of the message its
    worker may be running (the worker releases that one). Returns how many messages went
    back. Call with the engine's lock held, on an ordered claim of several lanes."""
    returned = unstarted(claim.run)
    claim.returned += len(returned)
    ran = claim.ran()  # started ones are a prefix: messages go back from the right only
    kept = scheduler.lane(claim.messages[ran - 1]) if ran > 0 else None
    if returned:
        scheduler.put_back(returned)
    released = [lane for lane in claim.lanes if lane != kept]
    if released:
        scheduler.release_all(released)
    claim.lanes = [] if kept is None else [kept]
    return len(returned)


def steal_claimed(
    claims: Iterable[Claim], partitions: Collection[PartitionId], scheduler: LaneScheduler
) -> list[Message]:
    """Take the unstarted messages of ``partitions`` out of ``claims`` (a revocation). A
    claim of one lane, or an unordered one, goes as :func:`~laneway.engines.lanes.steal`
    takes a run; from a claim of several lanes the others go back to the front of their
    lanes, which stay busy until the claim's worker releases them. Call with the engine's
    lock held (thread) or on its loop (async)."""
    stolen: list[Message] = []
    for claim in claims:
        if len(claim.lanes) == 1 or not scheduler.ordered:
            taken = steal(claim.run, partitions, scheduler)
            claim.returned += len(taken)
            stolen += taken
            continue
        taken = unstarted(claim.run)
        claim.returned += len(taken)
        wanted = [m for m in taken if (m.topic, m.partition) in partitions]
        if len(wanted) < len(taken):
            scheduler.put_back([m for m in taken if (m.topic, m.partition) not in partitions])
        stolen += wanted
    return stolen


def waiting_behind(message: Message, scheduler: LaneScheduler, claims: Iterable[Claim]) -> Waiting:
    """What cannot start until ``message``'s call returns: the messages of its lane queued
    in ``scheduler`` or left in a claim's run (unordered: nothing). Call with the engine's
    lock held (thread), or where the scheduler is not changing under it."""
    if not scheduler.ordered:
        return Waiting()
    lane = scheduler.lane(message)
    behind = scheduler.queued_in(lane)
    for claim in claims:
        behind += [m for m in list(claim.run) if scheduler.lane(m) == lane]
    return waiting_of(behind)
