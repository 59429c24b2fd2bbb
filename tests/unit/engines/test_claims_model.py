"""Lanes, claims and the watcher's give-back, checked as a state machine against a
reference scheduler: whatever workers claim, start, finish or hang on, and whenever the
watcher looks, no ready lane waits behind a busy claim beyond the bound.

The real :class:`~laneway.engines.lanes.LaneScheduler`, :class:`~laneway.engines.claims.Claim`
and :func:`~laneway.engines.claims.take_back_slow` run under a simulated clock; the
reference keeps, per lane, the offsets not yet started, in order. A lane is *ready* when
its next message is not started and no message of it is running. The bound: after the
watcher's look at time ``t``, a ready lane's next message is claimable, or sits in a claim
that started less than ``GIVE_BACK_AFTER`` before ``t``, or in a claim whose worker is
not inside a call (it will reach it without waiting for anything that could hang).
"""

from __future__ import annotations

from collections.abc import Hashable

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from laneway.engines.claims import GIVE_BACK_AFTER, Claim, take_back_slow
from laneway.engines.lanes import LaneScheduler
from laneway.options import Ordering
from laneway.types import Message

WORKERS = 3
KEYS = 5
PARTITIONS = 2


class Worker:
    def __init__(self) -> None:
        self.claim: Claim | None = None
        self.running: Message | None = None
        self.hung = False


class ClaimsModel(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.scheduler = LaneScheduler(Ordering.KEY, WORKERS, max_run=3)
        self.workers = [Worker() for _ in range(WORKERS)]
        self.now = 0.0
        self.offsets = [0] * PARTITIONS
        self.unstarted: dict[Hashable, list[int]] = {}
        """The reference: per lane, offsets not started yet, in order."""
        self.started: set[tuple[int, int]] = set()

    def lane(self, message: Message) -> Hashable:
        return self.scheduler.lane(message)

    @rule(keys=st.lists(st.integers(0, KEYS - 1), min_size=1, max_size=6))
    def fetch(self, keys: list[int]) -> None:
        messages = []
        for key in keys:
            partition = key % PARTITIONS
            message = Message("t", partition, self.offsets[partition], b"k%d" % key, b"")
            self.offsets[partition] += 1
            messages.append(message)
            self.unstarted.setdefault(self.lane(message), []).append(message.offset)
        self.scheduler.add(messages)

    @rule(w=st.integers(0, WORKERS - 1), size=st.integers(1, 8))
    def claim(self, w: int, size: int) -> None:
        worker = self.workers[w]
        if worker.claim is None:
            claimed = self.scheduler.claim_lanes(size)
            if claimed:
                worker.claim = Claim(claimed, self.now)

    @rule(w=st.integers(0, WORKERS - 1))
    def start_next(self, w: int) -> None:
        """The worker takes the next message of its claim, or ends the claim."""
        worker = self.workers[w]
        if worker.claim is None or worker.running is not None:
            return
        if not worker.claim.run:
            self.scheduler.release_all(worker.claim.lanes)
            worker.claim = None
            return
        message = worker.claim.run.popleft()
        lane = self.lane(message)
        for other in self.workers:
            if other is not worker and other.running is not None:
                assert self.lane(other.running) != lane, "a lane ran twice at once"
        assert self.unstarted[lane][0] == message.offset, "a lane ran out of order"
        self.unstarted[lane].pop(0)
        position = (message.partition, message.offset)
        assert position not in self.started, "a message ran twice"
        self.started.add(position)
        worker.running = message

    @rule(w=st.integers(0, WORKERS - 1))
    def finish(self, w: int) -> None:
        worker = self.workers[w]
        if not worker.hung:
            worker.running = None

    @precondition(lambda self: sum(w.hung for w in self.workers) < WORKERS - 1)
    @rule(w=st.integers(0, WORKERS - 1))
    def hang(self, w: int) -> None:
        """The call the worker is in never returns (one worker always stays free)."""
        worker = self.workers[w]
        if worker.running is not None:
            worker.hung = True

    @rule(seconds=st.sampled_from([0.001, 0.002, GIVE_BACK_AFTER, 0.02]))
    def watch(self, seconds: float) -> None:
        """Time passes; the engine's watcher looks."""
        self.now += seconds
        take_back_slow([w.claim for w in self.workers if w.claim], self.scheduler, self.now)

    @invariant()
    def no_ready_lane_waits_behind_a_busy_claim_beyond_the_bound(self) -> None:
        running = {self.lane(w.running) for w in self.workers if w.running is not None}
        for lane, offsets in self.unstarted.items():
            if not offsets or lane in running:
                continue
            holders = [
                w
                for w in self.workers
                if w.claim
                and (lane in w.claim.lanes or any(self.lane(m) == lane for m in w.claim.run))
            ]
            if not holders:  # nobody holds it: the scheduler must hand it out next
                queued = self.scheduler.queued_in(lane)
                assert queued and queued[0].offset == offsets[0], f"{lane} lost its next message"
                assert self.scheduler.ready_lanes(), f"{lane} is ready but cannot be claimed"
                continue
            [holder] = holders
            assert holder.claim is not None
            young = self.now - holder.claim.started < GIVE_BACK_AFTER
            inside_another_call = holder.running is not None and self.lane(holder.running) != lane
            assert young or not (inside_another_call and holder.hung), (
                f"{lane} waits in a claim {self.now - holder.claim.started:.3f} s old behind "
                "a call that does not return"
            )


ClaimsModel.TestCase.settings = settings(max_examples=120, stateful_step_count=50, deadline=None)
test_claims_model = ClaimsModel.TestCase
