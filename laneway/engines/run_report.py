"""RunReport: what one engine worker's run came to, reported to the control thread in batches."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable

from laneway.engines.base import Completions, InFlight, ResultGroup
from laneway.engines.batch_runs import BatchOutcome
from laneway.results import Records
from laneway.types import Failure, Message

REPORT_EVERY = 0.005
"""Seconds between progress reports within one run. A run can hold hundreds of messages
of a slow lane; reporting only at its end would keep finished messages counted against
``max_buffered`` (so nothing new is fetched for the other lanes) and uncommitted for the
whole run. One clock read per message is the price (~50 ns)."""


YIELD_SECONDS = 0.000_001
"""How long a worker sleeps after reporting a final failure, to let the control thread run
(the kernel rounds it up to its timer slack, about 50 us on Linux)."""


class RunReport:
    """The finished and failed messages of one run, reported to ``completions`` at least
    every ``REPORT_EVERY`` seconds (:meth:`start` checks before each message, with the
    clock it reads for the worker's :class:`InFlight`) and at the end (:meth:`end`).

    When ``timed``, each finished message's time in its handler (retries included) is
    taken from that same clock, from its start to the next message's start (or the run's
    end): no extra clock read per message. ``durations[i]`` is that of ``done[i]``.

    A worker inside a call that does not return cannot report what it finished before
    it, so the report is reachable from its :class:`InFlight` (``slot.report``) and the
    engine's watcher calls :meth:`hand_over` on it: what is finished so far is reported
    from the watcher's thread, and the worker's next :meth:`flush` reports only what
    came after. The worker appends to its lists without a lock (``list.append`` is
    atomic), and a hand-over only reads a prefix of them; the two reports take the
    report's lock, so each message is reported exactly once.
    """

    __slots__ = (
        "_completions", "_lock", "_report_at", "_sent", "_slot", "_timed", "done",
        "durations", "failed", "results", "retries",
    )  # fmt: skip

    def __init__(self, completions: Completions, slot: InFlight, timed: bool) -> None:
        self._completions = completions
        self._slot = slot
        self._timed = timed
        self._lock = threading.Lock()
        self._sent = (0, 0, 0)
        """How much of ``done`` (and ``durations``), ``failed`` and ``results`` a hand-over
        reported already."""
        self.done: list[Message] = []
        self.failed: list[Failure] = []
        self.durations: list[float] = []
        self.retries: dict[str, int] = {}
        self.results: list[ResultGroup] = []
        self._report_at = time.monotonic() + REPORT_EVERY
        slot.report = self

    def start(self, message: Message) -> None:
        """``message`` is about to run: report what is done if it is time, and note it."""
        now = time.monotonic()
        slot = self._slot
        if self._timed:  # inlined (this runs per message): the last one's handler time
            done = self.done
            if done and done[-1] is slot.message:
                self.durations.append(now - slot.since)
        if now >= self._report_at:
            self.flush()
            self._report_at = now + REPORT_EVERY
        slot.since = now
        slot.message = message

    def flush(self) -> None:
        """Report everything noted and not reported yet (the worker's own thread)."""
        with self._lock:
            done, failed, results = self._sent
            if done or failed or results:
                self._completions.report(
                    self.done[done:],
                    self.failed[failed:],
                    self.durations[done:],
                    self.retries,
                    self.results[results:],
                )
                self._sent = (0, 0, 0)
            else:
                self._completions.report(
                    self.done, self.failed, self.durations, self.retries, self.results
                )
            self.done, self.failed, self.durations, self.retries = [], [], [], {}
            self.results = []

    def hand_over(self) -> int:
        """Report, from another thread, what the worker finished and has not reported (it
        is inside a long call); how many messages that was. See the class docs."""
        with self._lock:
            done, failed, results = self._sent
            upto = len(self.done)
            if self._timed:  # only the messages whose handler time is noted already
                upto = min(upto, len(self.durations))
            new_failed, new_results = len(self.failed), len(self.results)
            count = upto - done + new_failed - failed + new_results - results
            if count:
                self._completions.report(
                    self.done[done:upto],
                    self.failed[failed:new_failed],
                    self.durations[done:upto],
                    None,
                    self.results[results:new_results],
                )
                self._sent = (upto, new_failed, new_results)
            return count

    def finished(self, message: Message, records: Records) -> None:
        """``message`` is done, with the results its handler returned."""
        if records:
            self.results.append(([message], records))
        else:
            self.done.append(message)

    def batch(self, outcome: BatchOutcome, seconds: float) -> None:
        """A batch ran for ``seconds``: note what it came to (each message done is timed
        at its share of the batch)."""
        self.done.extend(outcome.done)
        if self._timed and outcome.done:
            share = seconds / (len(outcome.done) + sum(len(g) for g, _ in outcome.results))
            self.durations.extend([share] * len(outcome.done))
        self.results.extend(outcome.results)
        self.failed.extend(outcome.failed)
        for topic, count in outcome.retries.items():
            self.retries[topic] = self.retries.get(topic, 0) + count

    def failed_for_good(self, failure: Failure) -> None:
        """A message failed its last attempt: report at once, so the control thread routes
        it and, when that opens its key's circuit, takes back the key's queued messages
        before this run reaches them (failures are rare; a report each costs little)."""
        self.failed.append(failure)
        self.flush()
        # Hand the GIL to the control thread the report just woke. Not sleep(0): before
        # Python 3.11 that is a select() that returns at once, and this thread takes the
        # GIL back before the control thread, woken on another core, can (on 3.10 a
        # poison key then ran ~50 calls past its threshold instead of ~2).
        time.sleep(YIELD_SECONDS)

    def retried(self, message: Message, attempts: int) -> None:
        """``message`` took ``attempts`` attempts (counted as retries for metrics)."""
        if attempts > 1:
            self.retries[message.topic] = self.retries.get(message.topic, 0) + attempts - 1

    def settled(self) -> float:
        """The message that just ran is settled (the gate needs its time at once): its
        seconds since it started, noted as its handler time when timed and it finished;
        nothing runs until the next :meth:`start`."""
        now = time.monotonic()
        if self._timed:
            self._time(now)
        slot = self._slot
        slot.message = None
        return now - slot.since

    def end(self) -> None:
        """The run is over (or aborted): nothing is running, everything is reported."""
        if self._timed:
            self._time(time.monotonic())
        self._slot.message = None
        self.flush()
        self._slot.report = None

    def _time(self, now: float) -> None:
        """The message that just ran took until ``now``: note it if it finished."""
        slot, done = self._slot, self.done
        if done and done[-1] is slot.message:
            self.durations.append(now - slot.since)


def hand_over_slow(slots: Iterable[InFlight], now: float) -> int:
    """Report what each worker finished before a call that has run ``REPORT_EVERY``
    seconds or more by ``now`` (see :meth:`RunReport.hand_over`); how many messages that
    was. An engine's watcher calls it, so that a call that never returns does not keep
    the messages its worker finished before it unreported (uncommitted, and counted
    against ``max_buffered``)."""
    handed = 0
    for slot in slots:
        report = slot.report
        if report is not None and slot.message is not None and now - slot.since >= REPORT_EVERY:
            handed += report.hand_over()
    return handed
