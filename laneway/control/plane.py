"""The control plane: source -> progress -> engine -> progress -> commit, on one thread.

Everything here runs on the consumer's control thread: polling, accepting batches,
collecting completions, committing, and the rebalance callbacks (which sources invoke
from inside ``poll``). Engines talk back only through :class:`Completions`. So no state
in this module is touched by two threads.

The parts, each its own object: the source's :class:`~laneway.offsets.progress.Progress`
(what may run, what is finished, what to commit) and the
:class:`~laneway.producing.result_writers.ResultWriter` (handler results), both chosen for the
consumer's guarantee by :func:`~laneway.control.durability.durability`,
:class:`Backpressure` (how much to fetch, when to pause), :class:`StopConditions` (when a
run ends), the :class:`DeadLetterRouter` (failed messages), the :class:`MessageCodecs`
(deserializers and serializers) and the :class:`Tally` (counters for ``stats()`` and
metrics).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Collection, Mapping, Sequence
from operator import attrgetter

from laneway.config import ConsumerConfig
from laneway.control.backlog import Backlog, BacklogWatch
from laneway.control.backpressure import BUSY_POLL_TIMEOUT, Backpressure
from laneway.control.codecs import MessageCodecs
from laneway.control.dead_letters.router import DeadLetterRouter
from laneway.control.durability import durability
from laneway.control.skew.containment import containment_for
from laneway.control.skew.release import release_for
from laneway.control.stalls import StallWatch
from laneway.control.stopping import ShutdownSteps, StopConditions, abandon
from laneway.control.tally import Tally
from laneway.engines.base import Completed, Completions, Engine
from laneway.engines.lanes import lane_function
from laneway.errors import AccessDeniedError, SourceError
from laneway.logs import get_logger
from laneway.producing.producer import TraceContext
from laneway.producing.result_writers import ACKNOWLEDGEMENT_WAIT
from laneway.sources.base import Source, SourceCapabilities
from laneway.state.keeper import NO_STATE, StateFigures, StateKeeper
from laneway.stats import ConsumerStats
from laneway.types import CommitPosition, Failure, HotKey, Message, PartitionId

log = get_logger(__name__)

_position = attrgetter("topic", "partition", "offset")


class ControlPlane:
    """Moves messages from a source through an engine and commits what is finished.

    One turn of :meth:`run`: collect what the engine finished (and the dead-letter path
    settled), stop if a stop condition is met, commit if ``commit_interval`` passed, then
    poll as much as backpressure allows. Rebalance callbacks arrive inside the poll.
    """

    def __init__(
        self,
        source: Source,
        capabilities: SourceCapabilities,
        engine: Engine,
        config: ConsumerConfig,
        stop: threading.Event,
        tracing: TraceContext | None = None,
        state: StateKeeper | None = None,
    ) -> None:
        self._source = source
        self._state = state
        self._events_in_poll = capabilities.events_in_poll
        self._engine = engine
        self._config = config
        self._stop = stop
        self.completions = Completions()
        self._progress, self._results = durability(source, config, tracing, state)
        self._containment = containment_for(config, source, capabilities, self._progress)
        self._release = release_for(config, engine)
        self._hot_keys: tuple[HotKey, ...] = ()
        self._router = DeadLetterRouter(source, config, tracing)
        self._codecs = MessageCodecs(config)
        self._backpressure = Backpressure(
            source,
            config.max_buffered,
            config.poll_batch_size,
            config.max_buffered_bytes,
            capabilities,
        )
        self._stopping = StopConditions(stop, None, None)
        self.denied: AccessDeniedError | None = None
        """The cluster's first refusal for good (see :meth:`refused`)."""
        self._abandoned = 0
        self._drain_deadline: float | None = None
        """While shutting down: when the drain ends, for the revocation that closing the
        source runs too (it must not drain the same messages again)."""
        self._tally = Tally(config.metrics)
        self._backlog = BacklogWatch()
        self._stalls = StallWatch.for_config(
            engine, config, self._backlog.finished_beyond, lambda: self._hot_keys
        )

    # -- the loop ---------------------------------------------------------------------

    def run(self, max_messages: int | None, idle_timeout: float | None) -> None:
        """Consume until stopped, ``max_messages`` handled, or idle for ``idle_timeout`` s."""
        self._stopping = StopConditions(self._stop, max_messages, idle_timeout)
        self._stalls.start()
        interval = self._config.commit_interval
        next_commit = time.monotonic() + interval
        while True:
            self._collect()
            self._containment.settled([])  # what is due to be read again, idle or not
            self._release.pump()
            if self._state is not None:
                self._restored()
            now = time.monotonic()
            if self._stopping.reached(self._tally.handled, self._progress.counts.buffered, now):
                break
            if now >= next_commit:
                # A failure (e.g. REBALANCE_IN_PROGRESS) marks nothing committed, so the
                # next interval (or the revocation) commits the same offsets.
                self._commit_or_warn(self._progress.partitions, "timed commit")
                next_commit = now + interval
            if self._backlog.due(now):
                self._sample(now)
            self._poll(now)

    def shut_down(self, abort: threading.Event) -> None:
        """Drain until done, ``drain_timeout`` or ``abort``; commit what is finished; close.

        Every part is closed whatever the drain or a commit raised (see
        :class:`ShutdownSteps`); a transaction that failed while draining ends the drain
        and skips the final commit: nothing may commit after it.
        """
        owned = list(self._progress.partitions)
        taken_back = self._release.cancel(owned) + self._held_back(owned)
        self._progress.unstarted(taken_back)
        deadline = time.monotonic() + self._config.drain_timeout
        self._drain_deadline = deadline
        steps = ShutdownSteps(self.refused)
        steps.run("draining", lambda: self._drain(abort, deadline))
        if not self._drained():
            self._abandoned = abandon(
                self._progress,
                self._engine,
                self._config.drain_timeout,
                abort.is_set(),
                taken_back,
                lane_function(self._config.ordering),
            )
        if not steps.failures:
            final, commit = self._progress.partitions, "final commit"
            steps.run(commit, lambda: self._commit_or_warn(final, commit))
        now = time.monotonic()
        if abort.is_set():
            self._drain_deadline = now
        self._tally.end(now)
        self._stalls.look(now)  # the final gauges: nothing runs any more
        steps.run("sampling", lambda: self._sample(now))

        def left() -> float:
            return 0.0 if abort.is_set() else max(0.0, deadline - time.monotonic())

        steps.run("closing dead letters", lambda: self._router.close(left()))
        # The source first: closing a Kafka consumer revokes its partitions, and the
        # revoke callback still talks to the engine.
        steps.run("closing the source", self._source.close)
        state = self._state
        if state is not None:
            drained = self._drained()
            steps.run("closing the state", lambda: state.close(drained=drained))
        steps.run("closing results", lambda: self._results.close(left()))
        steps.run("closing the engine", lambda: self._engine.close(left()))
        self._stalls.stop()
        steps.raise_first(self.denied)

    def _drain(self, abort: threading.Event, deadline: float) -> None:
        while time.monotonic() < deadline and not abort.is_set():
            if self._drained():
                break
            self.completions.wait(0.05)
            self._collect_unless_refused()
        self._collect_unless_refused()

    def refused(self, denial: AccessDeniedError) -> None:
        """The cluster refused this consumer for good: keep the first refusal (health
        names it, :meth:`shut_down` waits for no write, since none can succeed, and
        raises it) and log it once as an ERROR."""
        if self.denied is None:
            self.denied = denial
            log.error("stopping: %s", denial)

    def _drained(self) -> bool:
        """Nothing runs any more: no handler, dead letter or result write under way (after
        a refusal, only handlers are waited for)."""
        if self.denied is not None:
            return not self._engine.in_flight
        return not (self._engine.in_flight or self._router.pending or self._results.pending)

    def _unsettled(self, partitions: Collection[PartitionId]) -> bool:
        """Whether messages of ``partitions`` are still to be settled (after a refusal,
        only handlers still running count: no write can succeed)."""
        if self.denied is not None:
            return bool(self._engine.in_flight)
        return bool(self._progress.running(partitions))

    def _collect_unless_refused(self) -> None:
        """:meth:`_collect` while shutting down: a refusal is kept for the end."""
        try:
            self._collect()
        except AccessDeniedError as denial:
            self.refused(denial)

    # -- rebalance listener (called from inside source.poll) ---------------------------

    def on_assigned(self, positions: Mapping[PartitionId, CommitPosition | None]) -> None:
        self._progress.assign(positions)
        if self._state is not None:
            self._state.assigned(positions)
        self._tally.owned_topics({topic for topic, _ in self._progress.partitions})
        self._backpressure.assigned(positions)
        self._stopping.arrived(time.monotonic())
        self._tally.rebalanced("assigned", positions)
        log.info("assigned %s", sorted(positions))

    def on_revoked(self, partitions: Sequence[PartitionId]) -> None:
        owned = [pid for pid in partitions if pid in self._progress.partitions]
        self._collect()
        self._progress.unstarted(self._release.cancel(owned) + self._held_back(owned))
        deadline = time.monotonic() + self._config.drain_timeout
        if self._drain_deadline is not None:  # closing: the shutdown's drain is over
            deadline = min(deadline, self._drain_deadline)
        while self._unsettled(owned) and time.monotonic() < deadline:
            self.completions.wait(0.05)
            self._collect()
        self._commit_or_warn(owned, "commit on revoke")
        if self._state is not None:
            self._state.give_up(owned, drained=not self._unsettled(owned))
        self._give_up(owned)
        self._tally.rebalanced("revoked", owned)
        log.info("revoked %s", sorted(owned))

    def on_lost(self, partitions: Sequence[PartitionId]) -> None:
        owned = [pid for pid in partitions if pid in self._progress.partitions]
        self._progress.unstarted(self._release.cancel(owned) + self._held_back(owned))
        if self._state is not None:
            self._state.give_up(owned, drained=False)
        self._give_up(owned)
        self._tally.rebalanced("lost", owned)
        log.warning("lost %s without a chance to commit", sorted(owned))

    # -- internals ------------------------------------------------------------------

    def _poll(self, now: float) -> None:
        """Fetch as much as backpressure and the stop conditions allow, and dispatch it."""
        tally, progress = self._tally, self._progress
        left = self._stopping.left_to_fetch(tally.handled, progress.counts.buffered)
        # Acknowledgements of results are served by the next collect: don't sleep past them.
        cap = ACKNOWLEDGEMENT_WAIT if self._results.pending else BUSY_POLL_TIMEOUT
        if left == 0:
            # All that is left to handle is fetched: wait for the engine, not inside the
            # source (whose poll would sit out its timeout after the last message
            # finished), and poll without waiting only to serve group events.
            at_least = self._stopping.left_to_handle(tally.handled)
            if not self.completions.wait(cap, at_least) and self._events_in_poll:
                self._accept(self._source.poll(1, 0.0))
            return
        turn = self._backpressure.next_turn(progress, now, self._results.pending)
        if turn.wait:
            self.completions.wait(min(turn.wait, cap), turn.at_least)
        if turn.poll:
            most = turn.poll if left is None else min(turn.poll, left)
            self._accept(self._source.poll(most, min(turn.poll_timeout, cap)))

    def _accept(self, messages: list[Message]) -> None:
        if not messages:
            return
        now = time.monotonic()
        self._tally.arrived(now)
        self._backpressure.arrived(now)
        self._stopping.arrived(now)
        dispatch = self._admitted(self._progress.accept(messages))
        if dispatch:
            self._submit(self._decoded(dispatch))

    def _admitted(self, dispatch: list[Message]) -> list[Message]:
        """What of ``dispatch`` is kept: a hot key's excess is declined (see
        :mod:`laneway.control.skew.containment`)."""
        if not dispatch:
            return dispatch
        if self._state is not None:
            dispatch = self._state.admit(dispatch)
        return self._containment.admit(dispatch, self._progress.counts.buffered)

    def _restored(self) -> None:
        """Partitions whose state is restored: resumed (unless everything is paused), and
        their messages held back meanwhile dispatched."""
        ready, released = self._state.pump(time.monotonic())  # type: ignore[union-attr]
        if ready and self._backpressure.paused:
            self._source.pause(ready)
        if released:
            released = self._containment.admit(released, self._progress.counts.buffered)
            if released:
                self._submit(self._decoded(released))

    def _state_figures(self) -> StateFigures:
        return NO_STATE if self._state is None else self._state.figures()

    def _held_back(self, partitions: Collection[PartitionId]) -> list[Message]:
        """Messages of ``partitions`` held back while their state was restored."""
        return [] if self._state is None else self._state.take_back(partitions)

    def _decoded(self, messages: list[Message]) -> list[Message]:
        """``messages`` with their typed views (see :mod:`laneway.control.codecs`); those
        that do not decode go to dead letters at once, without running."""
        records, undecodable = self._codecs.decoded(messages)
        if undecodable:
            self._router.route(undecodable)
        return records

    def _submit(self, messages: list[Message]) -> None:
        runnable = self._router.divert_poisoned(messages)
        if runnable:
            self._release.submit(runnable)

    def _collect(self) -> None:
        done = self.completions.take_all()
        if done.retries:
            self._tally.retried(done.retries)
        handled = len(done.finished) + self._write_results(done)
        written, unwritten = self._results.poll()
        failed = done.failed + unwritten if unwritten else done.failed
        self._route_failures(failed)
        settled = self._router.poll()
        now = time.monotonic()
        if not (done.finished or settled or written or failed):
            if handled:
                self._backpressure.finished(handled, now)
            return
        finished = done.finished
        finished.extend(written)  # after the timed ones: durations cover a prefix
        self._tally.finished(finished, settled, now, done.durations)
        self._backpressure.finished(handled + len(settled), now)
        released = self._progress.settle(finished, settled)
        over = finished + settled if settled else finished
        self._containment.settled(over)
        self._release.settled(over, settled)
        released = self._admitted(released)
        if released:
            self._submit(self._decoded(released))

    def _write_results(self, done: Completed) -> int:
        """Hand the handlers' results to the result writer (those that do not encode fail
        their messages); how many messages returned them. The drain rate counts messages
        when their handler is done, not when their results are acknowledged: backpressure
        weighs them as handler work only until then (see Backpressure.next_turn)."""
        if not done.results:
            return 0
        results, unencodable = self._codecs.encoded(done.results)
        done.failed.extend(unencodable)
        self._results.write(results)
        return sum([len(messages) for messages, _ in results])

    def _route_failures(self, failed: list[Failure]) -> None:
        """Failed messages to dead letters: those that did not decode at once, the others
        once their progress gives up on them (asked every turn: a share group gives up
        records of its own, and retries the others by redelivery)."""
        if failed:
            failed, undecodable = self._codecs.undecodable(failed)
            if undecodable:
                self._router.route(undecodable)
        failed = self._progress.failed(failed)
        if failed:
            opened = self._router.route(failed)
            if opened:
                self._divert_queued(opened)

    def _divert_queued(self, partitions: Collection[PartitionId]) -> None:
        """A key's circuit just opened: take back what the engine has queued of its
        partitions, and submit it again, so that the key's messages go to dead letters
        instead of waiting in its lane for the handler (order per lane is kept)."""
        returned = self._release.cancel(partitions)
        if returned:
            returned.sort(key=_position)
            self._submit(returned)

    def _give_up(self, partitions: Collection[PartitionId]) -> None:
        self._backpressure.forget(partitions)
        self._containment.forget(partitions)
        self._progress.give_up(partitions)
        self._tally.owned_topics({topic for topic, _ in self._progress.partitions})

    def _commit_or_warn(self, partitions: Collection[PartitionId], what: str) -> None:
        """Commit, logging instead of raising when the source refuses (the offsets stay
        uncommitted and are tried again by the next commit); a refusal for good
        (:class:`AccessDeniedError`) is raised."""
        try:
            if self._state is not None:
                self._state.log_changes()
            self._progress.commit(partitions)
        except AccessDeniedError:
            raise  # permanent: ends the run
        except SourceError as error:
            log.warning("%s failed: %s", what, error)

    def _sample(self, now: float) -> None:
        progress = self._progress
        owned = progress.partitions
        ends = self._source.log_ends(owned) if owned else {}
        owned_figures = progress.backlog(ends)
        stalled = self._stalls.report.stalls
        backlog = self._backlog.sample(now, self._tally.handled, owned_figures, stalled)
        self._hot_keys = self._containment.hot_keys()
        if not self._tally.detailed:
            return
        committed = {pid: offset for pid, offset in progress.committed().items() if pid in owned}
        self._tally.sample(
            in_flight=self._engine.in_flight,
            buffered=progress.counts.buffered,
            paused=self._backpressure.paused_count(owned),
            committed=committed,
            worker_restarts=self._engine.worker_restarts,
            oldest=self._stalls.report.oldest_by_partition,
            waiting=self._stalls.report.waiting_by_partition,
            ends=ends,
            backlog=backlog,
            hot_keys=self._hot_keys,
            state=self._state_figures(),
            deleted=progress.counts.deleted,
        )

    @property
    def backlog(self) -> Backlog:
        """The latest backlog sample (see :class:`~laneway.control.backlog.BacklogWatch`);
        safe to read from any thread."""
        return self._backlog.latest

    def stats(self) -> ConsumerStats:
        tally = self._tally
        counts = self._progress.counts
        elapsed = tally.elapsed(time.monotonic())
        return ConsumerStats(
            processed=tally.processed,
            failed=tally.failed,
            dead_lettered=self._router.dead_lettered,
            skipped=counts.skipped,
            fenced=counts.fenced,
            deleted_unread=sum(counts.deleted.values()),
            in_flight=self._engine.in_flight,
            buffered=counts.buffered,
            buffered_bytes=counts.buffered_bytes,
            paused=self._backpressure.paused,
            commits=counts.commits,
            committed=self._progress.committed(),
            assigned=tuple(sorted(self._progress.partitions)),
            elapsed=elapsed,
            throughput=tally.handled / elapsed if elapsed > 0 else 0.0,
            latency_ms=tally.latency.percentiles(),
            worker_restarts=self._engine.worker_restarts,
            rebalances=tally.rebalances,
            oldest_in_flight=self._stalls.report.oldest,
            stalled=self._stalls.report.stalls,
            abandoned=self._abandoned,
            deserialization_failures=self._codecs.failures,
            oldest_by_partition=self._stalls.report.oldest_by_partition,
            paused_partitions=tuple(
                self._backpressure.paused_partitions(self._progress.partitions)
            ),
            # Only the process engine has workers of its own (a capability, not the protocol's).
            worker_pids=tuple(getattr(self._engine, "worker_pids", ())),
            rebalances_seen=tuple(tally.timeline),
            recent_failures=self._router.recent,
            hot_keys=self._hot_keys,
            held_off=self._containment.declined,
            **self._state_figures()._asdict(),
        )
