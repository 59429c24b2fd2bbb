"""Tally: the control plane's counters, read by ``stats()`` and reported as metrics."""

from __future__ import annotations

import hashlib
import math
import time
from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from operator import attrgetter

from laneway.control.backlog import Backlog
from laneway.metrics import DEFINITIONS, NO_METRICS, Distribution, Metric, Metrics
from laneway.state.keeper import NO_STATE, StateFigures
from laneway.stats import REBALANCES_KEPT, LatencyWindow, Rebalance
from laneway.types import HotKey, Message, PartitionId, Restore

HOT_RANKS = 10
"""How many hot keys the metrics show, by rank."""


def key_id(key: bytes | None) -> int:
    """A 48-bit id of ``key`` for the metrics (a float holds it exactly): the same key has
    the same id in every member, and the key itself is not shown."""
    digest = hashlib.blake2b(b"-" if key is None else b"k" + key, digest_size=6).digest()
    return int.from_bytes(digest, "big")


_topic_of = attrgetter("topic")
_timestamp_of = attrgetter("timestamp")
_E2E = DEFINITIONS[Metric.END_TO_END_LATENCY].buckets
_HANDLER = DEFINITIONS[Metric.HANDLER_DURATION].buckets


class Tally:
    """Counts what the control plane did, once, for both :meth:`ControlPlane.stats` and a
    :class:`~laneway.metrics.Metrics` backend.

    Counters are reported as they change, by topic; gauges when the control plane samples
    them (:meth:`sample`: every :data:`~laneway.control.backlog.SAMPLE_EVERY` seconds and
    at the end of a run). With the no-op backend the breakdown by
    topic is skipped, so an uninstrumented consumer pays one integer addition per batch.
    """

    def __init__(self, metrics: Metrics = NO_METRICS) -> None:
        self._metrics = metrics
        self._detailed = metrics is not NO_METRICS
        self.processed = 0
        self.failed = 0
        self.rebalances = 0
        self.timeline: deque[Rebalance] = deque(maxlen=REBALANCES_KEPT)
        """The latest ownership changes, oldest first (``stats().rebalances_seen``)."""
        self.latency = LatencyWindow()
        self.started: float | None = None
        self.ended: float | None = None
        self._last_finished: float | None = None
        self._sole_topic: str | None = None
        self._restarts = 0
        self._deleted: dict[str, int] = {}
        """The records deleted unread per topic as last reported (see :meth:`sample`)."""
        self._backlog_shown: set[PartitionId] = set()
        self._restores_shown: set[PartitionId] = set()

    @property
    def handled(self) -> int:
        """Messages done with: processed plus failed."""
        return self.processed + self.failed

    def arrived(self, now: float) -> None:
        """Messages were fetched at ``now`` (the first call starts the run's clock)."""
        if self.started is None:
            self.started = now

    def finished(
        self,
        processed: list[Message],
        failed: list[Message],
        now: float,
        durations: list[float] | None = None,
    ) -> None:
        """Messages settled by ``now``: ``processed`` by their handler (``durations[i]``:
        the handler time of ``processed[i]``, when measured), ``failed`` after their last
        attempt (dead-lettered or given to ``on_failure``)."""
        self._last_finished = now
        self.processed += len(processed)
        self.failed += len(failed)
        self.latency.record(processed)
        if failed:
            self.latency.record(failed)
        if self._detailed:
            self._report(Metric.MESSAGES_PROCESSED, processed, durations or None)
            self._report(Metric.MESSAGES_FAILED, failed, None)

    @property
    def detailed(self) -> bool:
        """Whether a real backend listens (else nothing beyond the counts is computed)."""
        return self._detailed

    def owned_topics(self, topics: set[str]) -> None:
        """The topics of the partitions owned now: with one, nothing is grouped by topic."""
        self._sole_topic = next(iter(topics)) if len(topics) == 1 else None

    def retried(self, retries: dict[str, int]) -> None:
        """Retries made per topic, as engines report them."""
        for topic, count in retries.items():
            self._metrics.increment(Metric.RETRIES, count, (topic,))

    def _report(
        self, counter: Metric, messages: list[Message], durations: list[float] | None
    ) -> None:
        """Count ``messages`` and observe their end-to-end latency (and handler times)
        per topic, bucketed in one pass (see :class:`~laneway.metrics.Distribution`)."""
        if not messages:
            return
        now_ms = time.time() * 1000.0
        metrics = self._metrics
        for topic, group, times in self._by_topic(messages, durations):
            labels = (topic,)
            metrics.increment(counter, len(group), labels)
            ages = Distribution.of_ages(now_ms, list(map(_timestamp_of, group)), _E2E)
            metrics.observe(Metric.END_TO_END_LATENCY, ages, labels)
            if ages.clamped:
                metrics.increment(Metric.CLOCK_SKEW, ages.clamped, labels)
            if times:
                batch = Distribution.of_values(times, _HANDLER)
                metrics.observe(Metric.HANDLER_DURATION, batch, labels)

    def _by_topic(
        self, messages: list[Message], durations: list[float] | None
    ) -> list[tuple[str, list[Message], list[float] | None]]:
        if self._sole_topic is not None:
            return [(self._sole_topic, messages, durations)]
        groups: dict[str, tuple[list[Message], list[float]]] = {}
        for index, message in enumerate(messages):
            group = groups.setdefault(message.topic, ([], []))
            group[0].append(message)
            if durations is not None and index < len(durations):
                group[1].append(durations[index])
        return [(topic, group, times or None) for topic, (group, times) in groups.items()]

    def end(self, now: float) -> None:
        """The run is over: its clock stops at the last message settled (an idle wait
        before the end is not part of the run), or at ``now`` if none was."""
        self.ended = now if self._last_finished is None else self._last_finished

    def elapsed(self, now: float) -> float:
        """Seconds from the first fetch to ``now``, or to the end once the run ended."""
        if self.started is None:
            return 0.0
        return max(0.0, (now if self.ended is None else self.ended) - self.started)

    def rebalanced(self, kind: str, partitions: Iterable[PartitionId]) -> None:
        """``partitions`` were ``assigned``, ``revoked`` or ``lost`` (kept in :attr:`timeline`)."""
        self.rebalances += 1
        self.timeline.append(Rebalance(time.time(), kind, tuple(sorted(partitions))))
        self._metrics.increment(Metric.REBALANCES, 1)

    def sample(
        self,
        in_flight: int,
        buffered: int,
        paused: int,
        committed: Mapping[PartitionId, int],
        worker_restarts: int,
        oldest: Mapping[PartitionId, float],
        ends: Mapping[PartitionId, int],
        backlog: Backlog,
        waiting: Mapping[PartitionId, int],
        hot_keys: Sequence[HotKey] = (),
        state: StateFigures = NO_STATE,
        deleted: Mapping[str, int] | None = None,
    ) -> None:
        """Report the gauges (and worker restarts since the last sample) of the owned
        partitions in ``committed``: the committed offset, the lag behind the log's end
        (where ``ends`` knows it), the age of the oldest running message (0: none) and the
        messages ``waiting`` for a stalled call (0: none); the ``backlog`` (see
        :meth:`_backlog`); the ten ``hot_keys`` by rank (see :func:`key_id`); and the
        ``state`` restores under way (see :meth:`_restores`) and partitions whose state is
        not durable; the records ``deleted`` unread so far, by topic (counted as they grow)."""
        metrics = self._metrics
        metrics.gauge(Metric.IN_FLIGHT, in_flight)
        metrics.gauge(Metric.BUFFERED, buffered)
        metrics.gauge(Metric.PAUSED_PARTITIONS, paused)
        for pid, offset in committed.items():
            labels = (pid[0], str(pid[1]))
            metrics.gauge(Metric.COMMITTED_OFFSET, offset, labels)
            metrics.gauge(Metric.OLDEST_UNFINISHED, oldest.get(pid, 0.0), labels)
            metrics.gauge(Metric.STALLED_WAITING, waiting.get(pid, 0), labels)
            end = ends.get(pid)
            if end is not None:
                metrics.gauge(Metric.CONSUMER_LAG, max(0, end - offset), labels)
        for rank in range(HOT_RANKS):
            hot = hot_keys[rank] if rank < len(hot_keys) else None
            label = (str(rank + 1),)
            metrics.gauge(Metric.HOT_KEY_MESSAGES, 0 if hot is None else hot.buffered, label)
            metrics.gauge(Metric.HOT_KEY_ID, 0 if hot is None else key_id(hot.key), label)
        if worker_restarts > self._restarts:
            metrics.increment(Metric.WORKER_RESTARTS, worker_restarts - self._restarts)
            self._restarts = worker_restarts
        self._backlog(backlog)
        self._restores(state.restoring)
        metrics.gauge(Metric.STATE_NOT_DURABLE, len(state.not_durable))
        for topic, count in (deleted or {}).items():
            seen = self._deleted.get(topic, 0)
            if count > seen:
                metrics.increment(Metric.RECORDS_DELETED_UNREAD, count - seen, (topic,))
                self._deleted[topic] = count

    def _restores(self, restoring: Sequence[Restore]) -> None:
        """How many partitions restore their state, and each one's changelog records left
        to read; 0 for a partition reported before whose restore ended (or that moved)."""
        self._metrics.gauge(Metric.STATE_RESTORING, len(restoring))
        left = {(r.topic, r.partition): r.remaining for r in restoring}
        self._restores_shown = self._by_partition(
            Metric.STATE_RESTORE_REMAINING, left, self._restores_shown
        )

    def _backlog(self, backlog: Backlog) -> None:
        """The backlog of each partition in ``backlog`` and 0 for those reported before and
        no longer owned (a sum over the group's members counts each partition once; the
        last value would stay otherwise), and the drain time (NaN when unknown)."""
        figures = {(p.topic, p.partition): p.backlog for p in backlog.partitions}
        self._backlog_shown = self._by_partition(Metric.BACKLOG, figures, self._backlog_shown)
        drain = backlog.drain_seconds
        self._metrics.gauge(Metric.DRAIN_SECONDS, math.nan if drain is None else drain)

    def _by_partition(
        self, gauge: Metric, values: Mapping[PartitionId, float], shown: set[PartitionId]
    ) -> set[PartitionId]:
        """``gauge`` of each partition in ``values``, and 0 for those in ``shown`` (reported
        before) that are not; the partitions shown now."""
        for pid, value in values.items():
            self._metrics.gauge(gauge, value, (pid[0], str(pid[1])))
        for topic, number in shown - values.keys():
            self._metrics.gauge(gauge, 0, (topic, str(number)))
        return set(values)
