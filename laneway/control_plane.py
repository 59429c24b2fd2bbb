"""The control plane: source -> ownership -> engine -> offsets -> commit, on one thread.

Everything here runs on the consumer's control thread: polling, accepting batches,
collecting completions, committing, and the rebalance callbacks (which sources invoke
from inside ``poll``). Engines talk back only through :class:`Completions`. So no state
in this module is touched by two threads.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Collection, Mapping, Sequence
from operator import attrgetter

from laneway.config import ConsumerConfig
from laneway.dead_letters import DeadLetterRouter, FailureCallback
from laneway.engines.base import Completions, Engine
from laneway.errors import SourceError
from laneway.scheduling.fair_share import FairShare
from laneway.sources.base import Source
from laneway.stats import ConsumerStats, LatencyWindow
from laneway.types import CommitPosition, Message, PartitionId

log = logging.getLogger(__name__)

_partition_of = attrgetter("topic", "partition")

IDLE_POLL_TIMEOUT = 0.1
"""Seconds one poll may wait when nothing is in flight (bounds how late stop() is seen)."""
BUSY_POLL_TIMEOUT = 0.02
"""Seconds one poll may wait while handlers are running. A poll returns at once when
messages arrive, so this only sets how often finished work is collected when nothing new
comes (e.g. the whole backlog is fetched): every 20 ms rather than every 5 ms cut the
control thread's GIL wake-ups fourfold and made 5 ms blocking handlers on 100 threads run
~5% faster (they wait less for the GIL after each sleep)."""
PAUSE_AFTER = 0.25
"""Seconds ``max_buffered`` must stay reached before the source's partitions are paused."""


class ControlPlane:
    """Moves messages from a source through an engine and commits what is finished.

    Backpressure: once ``max_buffered`` messages are fetched but unfinished, nothing more
    is fetched; if that lasts ``PAUSE_AFTER`` seconds, every owned partition is paused (the
    source keeps being polled, so a Kafka group session stays alive and rebalances are
    served) until the count falls to half of it. One poll asks for no more than a
    partition's fair share of the buffer, and :class:`FairShare` pauses partitions that
    hold more than that while the buffer fills, so the keys of every partition get work.
    """

    def __init__(
        self,
        source: Source,
        engine: Engine,
        config: ConsumerConfig,
        stop: threading.Event,
        on_failure: FailureCallback | None = None,
    ) -> None:
        self._source = source
        self._router = DeadLetterRouter(source, config, on_failure)
        self._engine = engine
        self._config = config
        self._stop = stop
        self.completions = Completions()
        self._progress = source.progress(config.metadata_max_bytes)
        self._owned = self._progress.partitions
        self._latency = LatencyWindow()
        self._fair = FairShare(source, config.max_buffered)
        self._paused = False
        self._processed = 0
        self._failed = 0
        self._started: float | None = None
        self._ended: float | None = None
        self._last_arrival = time.monotonic()

    # -- the loop ---------------------------------------------------------------------

    def run(self, max_messages: int | None, idle_timeout: float | None) -> None:
        """Consume until stopped, ``max_messages`` handled, or idle for ``idle_timeout`` s."""
        config = self._config
        self._last_arrival = time.monotonic()
        last_commit = time.monotonic()
        low_water = config.max_buffered // 2
        # Room is worth a poll once it holds a 16th of the buffer: refilling message by
        # message as each one finishes woke this thread (and took the GIL from handler
        # threads) hundreds of times a second for one- or two-message polls.
        worth_a_poll = max(1, min(config.poll_batch_size, config.max_buffered // 16))
        full_since: float | None = None
        while True:
            self._collect()
            now = time.monotonic()
            if self._stop.is_set():
                break
            handled = self._processed + self._failed
            if max_messages is not None and handled >= max_messages:
                break
            if (
                idle_timeout is not None
                and self._progress.buffered == 0
                and now - self._last_arrival >= idle_timeout
            ):
                break
            if now - last_commit >= config.commit_interval:
                # A failure (e.g. REBALANCE_IN_PROGRESS) marks nothing committed, so the
                # next interval (or the revocation) commits the same offsets.
                self._commit_or_warn(self._owned, "timed commit")
                last_commit = now
            if max_messages is not None and handled + self._progress.buffered >= max_messages:
                # All that is left to handle is fetched: wait for the engine, not inside
                # the source (whose poll would sit out its timeout after the last message
                # finished), and poll without waiting only to serve group events.
                if not self.completions.wait(BUSY_POLL_TIMEOUT, max_messages - handled):
                    self._accept(self._source.poll(1, 0.0))
                continue
            room = config.max_buffered - self._progress.buffered
            self._fair.balance(self._owned, room, self._paused)
            if self._paused and self._progress.buffered <= low_water:
                self._set_paused(False)
            elif not self._paused and room < worth_a_poll:
                # Full: fetch nothing more. Pause only if it stays full for a while:
                # pausing drops the client's prefetched data, so fast handlers that free
                # room within moments would pay a refetch for nothing.
                full_since = now if full_since is None else full_since
                if now - full_since < PAUSE_AFTER:
                    self.completions.wait(BUSY_POLL_TIMEOUT, worth_a_poll - max(0, room))
                    continue
                self._set_paused(True)
            full_since = None
            if self._paused:
                self.completions.wait(IDLE_POLL_TIMEOUT)
                self._accept(self._source.poll(max(room, 1), 0.0))
                continue
            timeout = BUSY_POLL_TIMEOUT if self._progress.buffered else IDLE_POLL_TIMEOUT
            most = min(room, config.poll_batch_size, self._fair.poll_limit(len(self._owned)))
            if max_messages is not None:
                most = min(most, max_messages - handled - self._progress.buffered)
            self._accept(self._source.poll(most, timeout))

    def shut_down(self, abort: threading.Event) -> None:
        """Drain until done, ``drain_timeout`` or ``abort``; commit what is finished; close."""
        owned = list(self._owned)
        self._progress.unstarted(self._engine.cancel(owned))
        deadline = time.monotonic() + self._config.drain_timeout
        while time.monotonic() < deadline and not abort.is_set():
            if not self._engine.in_flight and not self._router.pending:
                break
            self.completions.wait(0.05)
            self._collect()
        self._collect()
        self._commit_or_warn(self._owned, "final commit")
        self._ended = time.monotonic()
        self._router.close(0.0 if abort.is_set() else max(0.0, deadline - time.monotonic()))
        # The source first: closing a Kafka consumer revokes its partitions, and the
        # revoke callback still talks to the engine.
        self._source.close()
        remaining = 0.0 if abort.is_set() else max(0.0, deadline - time.monotonic())
        self._engine.close(remaining)

    # -- rebalance listener (called from inside source.poll) ---------------------------

    def on_assigned(self, positions: Mapping[PartitionId, CommitPosition | None]) -> None:
        self._progress.assign(positions)
        if self._paused:
            self._source.pause(positions)
        self._last_arrival = time.monotonic()
        log.info("assigned %s", sorted(positions))

    def on_revoked(self, partitions: Sequence[PartitionId]) -> None:
        owned = [pid for pid in partitions if pid in self._owned]
        self._collect()
        self._progress.unstarted(self._engine.cancel(owned))
        deadline = time.monotonic() + self._config.drain_timeout
        while self._progress.running(owned) and time.monotonic() < deadline:
            self.completions.wait(0.05)
            self._collect()
        self._commit_or_warn(owned, "commit on revoke")
        self._give_up(owned)
        log.info("revoked %s", sorted(owned))

    def on_lost(self, partitions: Sequence[PartitionId]) -> None:
        owned = [pid for pid in partitions if pid in self._owned]
        self._progress.unstarted(self._engine.cancel(owned))
        self._give_up(owned)
        log.warning("lost %s without a chance to commit", sorted(owned))

    # -- internals ------------------------------------------------------------------

    def _accept(self, messages: list[Message]) -> None:
        if not messages:
            return
        now = time.monotonic()
        if self._started is None:
            self._started = now
            self._fair.drain.started(now)
        self._last_arrival = now
        dispatch = self._progress.accept(messages)
        if dispatch:
            self._submit(dispatch)

    def _submit(self, messages: list[Message]) -> None:
        runnable = self._router.divert_poisoned(messages)
        if runnable:
            self._engine.submit(runnable)

    def _collect(self) -> None:
        finished, failed = self.completions.take()
        if failed:
            self._router.route(failed)
        settled = self._router.poll()
        self._processed += len(finished)
        self._failed += len(settled)
        if settled:
            finished.extend(settled)
        if not finished:
            return
        self._fair.drain.finished(len(finished), time.monotonic())
        self._latency.record(finished)
        released = self._progress.settle(finished)
        if released:
            self._submit(released)

    def _give_up(self, partitions: Collection[PartitionId]) -> None:
        for pid in partitions:
            self._fair.forget(pid)
        self._progress.give_up(partitions)

    def _commit_or_warn(self, partitions: Collection[PartitionId], what: str) -> None:
        """Commit, logging instead of raising when the source refuses (the offsets stay
        uncommitted and are tried again by the next commit)."""
        try:
            self._progress.commit(partitions)
        except SourceError as error:
            log.warning("%s failed: %s", what, error)

    def _set_paused(self, paused: bool) -> None:
        if paused:
            self._source.pause(self._owned)
        else:
            self._source.resume(self._fair.resumable(self._owned))
        self._paused = paused

    def stats(self) -> ConsumerStats:
        end = time.monotonic() if self._ended is None else self._ended
        elapsed = 0.0 if self._started is None else end - self._started
        handled = self._processed + self._failed
        return ConsumerStats(
            processed=self._processed,
            failed=self._failed,
            dead_lettered=self._router.dead_lettered,
            skipped=self._progress.skipped,
            fenced=self._progress.fenced,
            in_flight=self._engine.in_flight,
            buffered=self._progress.buffered,
            paused=self._paused,
            commits=self._progress.commits,
            committed=self._progress.committed(),
            assigned=tuple(sorted(self._owned)),
            elapsed=elapsed,
            throughput=handled / elapsed if elapsed > 0 else 0.0,
            latency_ms=self._latency.percentiles(),
            worker_restarts=self._engine.worker_restarts,
        )
