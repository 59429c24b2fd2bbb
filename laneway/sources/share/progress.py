"""ShareProgress: the progress of a Kafka share group, acknowledged record by record.

A share group commits no offsets: each record is *acquired* by one member for the group's
record lock and then acknowledged on its own. ShareProgress decides each acknowledgement:

* ``ACCEPT`` when the handler finished the record;
* ``RELEASE`` for a retry when laneway's retry policy says so: a failed record whose
  ``delivery_count`` is at most ``max_retries`` (and below the group's delivery limit) is
  held for its backoff (``retry_backoff`` doubling per delivery, capped by
  ``retry_backoff_max`` and by what is left of its lock) and then released, so the broker
  delivers it again, to any member, with ``delivery_count + 1``. Engines make one attempt
  per delivery (see :class:`~laneway.sources.capabilities.SourceCapabilities`), so the
  attempt count survives crashes and travels between members. Records an engine gives
  back unstarted (a stop) are released at once;
* ``REJECT`` only once a failed record is settled after its last delivery: its dead
  letter was acknowledged by the log (or ``on_failure`` returned).

Acknowledgements are local calls; they reach the broker with the next fetch, which the
source makes only once every record of the previous one is acknowledged, or with
:meth:`commit` (every ``commit_interval``), whichever comes first: one request per poll,
not per record. :meth:`awaiting` tells the control loop not to poll before then.

*Lock guard*: :meth:`commit` warns once per fetch when records of it are still
unacknowledged after ``LOCK_WARNING`` of the record lock (they will be delivered again
when it expires, possibly while still running here), and reports their age as the
``laneway_oldest_acquired_seconds`` gauge.

*Crash loops*: with a :class:`~laneway.sources.share.crash_journal.CrashJournal`, records that
were in flight when a member died are run alone, and one that was running alone when
its process died is given up without running (error type ``ProcessDied``): dead-lettered,
then rejected.
"""

from __future__ import annotations

import dataclasses
import heapq
import itertools
import time
from collections import Counter, deque
from collections.abc import Collection, Mapping
from operator import attrgetter

from laneway.config import ConsumerConfig
from laneway.logs import get_logger
from laneway.metrics import NO_METRICS, Metric
from laneway.offsets.backlog import PartitionBacklog
from laneway.offsets.footprint import footprint
from laneway.offsets.progress import ProgressCounts
from laneway.sources.share.acknowledgement import Acknowledgement, RecordAcknowledger
from laneway.sources.share.crash_journal import CrashJournal, RecordId
from laneway.types import CommitPosition, Failure, Message, PartitionId

log = get_logger(__name__)

LOCK_WARNING = 0.8
"""Share of the record lock after which unacknowledged records are warned about."""
LOCK_MARGIN = 0.2
"""Share of the record lock a retry backoff leaves free (the release must reach the
broker before the lock expires, or the expiry delivers the record again first)."""
REFRESH_EVERY = 1.0
"""Seconds between two looks for dead members' journals while nothing prompts one."""
PROCESS_DIED = "ProcessDied"

_partition_of = attrgetter("topic", "partition")
_delivery_count = attrgetter("delivery_count")
_record_id = attrgetter("topic", "partition", "offset")


class _Load:
    """Fetched, unsettled records of one partition (for the control loop's bookkeeping)."""

    __slots__ = ("buffered",)

    def __init__(self) -> None:
        self.buffered = 0


class ShareProgress:
    """:class:`~laneway.offsets.progress.Progress` by per-record acknowledgement (see module
    docs). Tuning: ``max_retries`` and ``retry_backoff``/``retry_backoff_max`` shape the
    retries; the group's record lock must cover a fetch's worth of handling."""

    def __init__(
        self,
        source: RecordAcknowledger,
        config: ConsumerConfig,
        journal: CrashJournal | None = None,
    ) -> None:
        self._source = source
        self._policy = config.retry
        self._metrics = config.metrics
        self._detailed = config.metrics is not NO_METRICS
        self._journal = journal
        self._loads: dict[PartitionId, _Load] = {}
        self._counts = ProgressCounts()
        self._in_engine = 0
        self._backoffs: list[tuple[float, int, Message]] = []
        self._sequence = itertools.count()
        self._held: deque[Message] = deque()  # crash suspects waiting to run alone
        self._alone: Message | None = None
        self._doomed: list[Failure] = []  # given up unrun, not yet handed to the loop
        self._doomed_ids: set[RecordId] = set()  # given up unrun, not yet settled
        self._warned_for = -1.0  # acquired_at of the fetch the lock guard warned about
        self._refreshed = time.monotonic()

    # -- Progress: what the control loop reads ----------------------------------------

    @property
    def counts(self) -> ProgressCounts:
        """``fenced`` counts acknowledgements the broker refused (the record lock had
        expired); ``skipped`` stays 0 (a share group delivers nothing done before)."""
        return self._counts

    @property
    def partitions(self) -> Mapping[PartitionId, _Load]:
        """Partitions with records held now (a share group owns none exclusively)."""
        return self._loads

    def committed(self) -> dict[PartitionId, int]:
        return {}

    def backlog(self, ends: Mapping[PartitionId, int]) -> tuple[PartitionBacklog, ...] | None:
        """A share group commits no offsets: its backlog is not known to a member."""
        return None

    def assign(self, positions: Mapping[PartitionId, CommitPosition | None]) -> None:
        """Share groups assign nothing exclusively; never called."""

    def give_up(self, partitions: Collection[PartitionId]) -> None:
        """Share groups revoke nothing; never called."""

    def running(self, partitions: Collection[PartitionId]) -> int:
        loads = self._loads
        return sum(loads[pid].buffered for pid in partitions if pid in loads)

    # -- Progress: the life of a record -----------------------------------------------

    def accept(self, messages: list[Message]) -> list[Message]:
        count = len(messages)
        tally = self._counts
        tally.buffered += count
        weight = footprint(messages)
        tally.buffered_bytes += weight.total
        if weight.largest > tally.largest_message:
            tally.largest_message = weight.largest
        self._count_in(messages, 1)
        deliveries = list(map(_delivery_count, messages))
        redelivered = count - deliveries.count(1)
        if redelivered:
            self._redelivered(messages)
        journal = self._journal
        if journal is None or not journal.suspects:
            self._dispatch(messages)
            return messages
        runnable: list[Message] = []
        for message in messages:
            suspect = journal.suspects.get(_record_id(message))
            if suspect is None:
                runnable.append(message)
            elif suspect.alone:
                self._doom(message, suspect.deaths)
            else:
                self._held.append(message)
        self._dispatch(runnable)
        if not self._in_engine and self._held:
            return [self._run_alone()]
        return runnable

    def unstarted(self, messages: list[Message]) -> None:
        """Given back by an engine (a stop): released at once for another member."""
        self._in_engine -= len(messages)
        self._let_go(messages, Acknowledgement.RELEASE)

    def decline(self, messages: list[Message]) -> None:
        """Not kept: released at once, so the group delivers them again."""
        self.unstarted(messages)

    def declined(self) -> dict[PartitionId, tuple[int, int]]:
        """Nothing to read again: a share group delivers released records on its own."""
        return {}

    def settle(self, finished: list[Message], given_up: list[Message]) -> list[Message]:
        if finished:
            self._in_engine -= len(finished)
            self._let_go(finished, Acknowledgement.ACCEPT)
        if given_up:
            unrun = 0
            if self._doomed_ids:
                for record in map(_record_id, given_up):
                    if record in self._doomed_ids:
                        self._doomed_ids.discard(record)
                        unrun += 1
            self._in_engine -= len(given_up) - unrun
            self._let_go(given_up, Acknowledgement.REJECT)
        if self._alone is not None and self._alone in (finished + given_up):
            self._alone = None
        if not self._in_engine and self._alone is None and self._held:
            return [self._run_alone()]
        return []

    def failed(self, failures: list[Failure]) -> list[Failure]:
        """Hold each failure that has deliveries left for its backoff, then release it
        (see module docs); return the others, and the records given up without running."""
        give_up, self._doomed = self._doomed, []
        if not failures:
            return give_up
        alone = self._alone
        if alone is not None and any(f.message == alone for f in failures):
            # It raised rather than killing the process: no longer a suspect, and the
            # next suspect may run (the control loop settles after failures).
            self._alone = None
            if self._journal is not None:
                self._journal.forget([_record_id(alone)])
        now = time.monotonic()
        source = self._source
        lock_left = source.acquired_at + source.lock_duration * (1 - LOCK_MARGIN) - now
        policy, limit = self._policy, source.delivery_limit
        retried: Counter[str] = Counter()
        for failure in failures:
            message = failure.message
            delivery = message.delivery_count or 1
            if delivery <= policy.max_retries and delivery < limit:
                self._in_engine -= 1
                delay = max(0.0, min(policy.delay(delivery), lock_left))
                heapq.heappush(self._backoffs, (now + delay, next(self._sequence), message))
                retried[message.topic] += 1
            else:
                give_up.append(dataclasses.replace(failure, attempts=delivery))
        for topic, count in retried.items():
            self._metrics.increment(Metric.RETRIES, count, (topic,))
        return give_up

    def awaiting(self, now: float) -> int:
        backoffs = self._backoffs
        if backoffs and backoffs[0][0] <= now:
            due: list[Message] = []
            while backoffs and backoffs[0][0] <= now:
                due.append(heapq.heappop(backoffs)[2])
            self._let_go(due, Acknowledgement.RELEASE)
        return self._source.awaiting_acknowledgement

    def commit(self, partitions: Collection[PartitionId]) -> None:
        """Send the acknowledgements made so far, and look after the record lock."""
        source = self._source
        if source.flush():
            self._counts.commits += 1
        now = time.monotonic()
        self._guard_lock(now)
        refused = source.refused()
        if refused:
            self._counts.fenced += sum(refused.values())
            for topic, count in refused.items():
                self._metrics.increment(Metric.ACKNOWLEDGE_ERRORS, count, (topic,))
            log.warning(
                "the broker refused %d acknowledgement(s) (%s): their record lock had "
                "expired, so they are delivered again; raise the group's "
                "share.record.lock.duration.ms or fetch fewer records (max.poll.records)",
                sum(refused.values()),
                ", ".join(f"{topic}: {count}" for topic, count in sorted(refused.items())),
            )
        if self._journal is not None and now - self._refreshed >= REFRESH_EVERY:
            self._refreshed = now
            self._journal.refresh()

    # -- internals ------------------------------------------------------------------

    def _dispatch(self, messages: list[Message]) -> None:
        if not messages:
            return
        if self._journal is not None:
            nothing_in_flight = self._in_engine == 0 and self._alone is None
            self._journal.dispatched(messages, fresh=nothing_in_flight and not self._held)
        self._in_engine += len(messages)

    def _run_alone(self) -> Message:
        message = self._held.popleft()
        assert self._journal is not None
        self._journal.alone(message)
        self._alone = message
        self._in_engine += 1
        log.warning(
            "running %s[%d]@%d alone: it was in flight when a member process died",
            message.topic,
            message.partition,
            message.offset,
        )
        return message

    def _doom(self, message: Message, deaths: int) -> None:
        """A record that was running alone when its process died: given up unrun."""
        text = (
            f"the member process died {deaths} time(s) while this record was in flight, "
            "once while it ran alone; it is dead-lettered without running again"
        )
        self._doomed.append(Failure(message, PROCESS_DIED, text, message.delivery_count or 1))
        self._doomed_ids.add(_record_id(message))

    def _let_go(self, messages: list[Message], kind: Acknowledgement) -> None:
        """Acknowledge ``messages``: no longer buffered, in flight or suspected."""
        self._source.acknowledge(messages, kind)
        counts = self._counts
        if len(messages) == counts.buffered:
            # Everything buffered is settled (the usual end of a fetch): nothing is left to
            # weigh or count, so skip the per-record passes, which would add to the time
            # the source waits before it may fetch again.
            counts.buffered = counts.buffered_bytes = 0
            self._loads.clear()
        else:
            counts.buffered -= len(messages)
            counts.buffered_bytes -= footprint(messages).total
            self._count_in(messages, -1)
        journal = self._journal
        if journal is not None:
            journal.settled(messages)
            if journal.suspects:
                journal.forget(map(_record_id, messages))
        if self._detailed:
            for topic, count in Counter(m.topic for m in messages).items():
                self._metrics.increment(Metric.ACKNOWLEDGEMENTS, count, (topic, kind.value))

    def _count_in(self, messages: list[Message], sign: int) -> None:
        loads = self._loads
        for pid, count in Counter(map(_partition_of, messages)).items():
            load = loads.get(pid)
            if load is None:
                load = loads[pid] = _Load()
            load.buffered += sign * count
            if not load.buffered:
                del loads[pid]

    def _redelivered(self, messages: list[Message]) -> None:
        again = [m for m in messages if (m.delivery_count or 1) > 1]
        if self._detailed:
            for topic, count in Counter(m.topic for m in again).items():
                self._metrics.increment(Metric.REDELIVERIES, count, (topic,))
        journal = self._journal
        if journal is not None and journal.refresh([_record_id(m) for m in again]):
            suspected = Counter(m.topic for m in messages if _record_id(m) in journal.suspects)
            for topic, count in suspected.items():
                self._metrics.increment(Metric.CRASH_SUSPECTS, count, (topic,))

    def _guard_lock(self, now: float) -> None:
        source = self._source
        pending = source.unacknowledged
        age = now - source.acquired_at if pending else 0.0
        if self._detailed:
            self._metrics.gauge(Metric.OLDEST_ACQUIRED, age)
        lock = source.lock_duration
        if pending and age >= LOCK_WARNING * lock and self._warned_for != source.acquired_at:
            self._warned_for = source.acquired_at
            log.warning(
                "%d record(s) fetched %.1f s ago are not acknowledged yet; the share group's "
                "record lock is %g s: past it they are delivered again, possibly while they "
                "still run here. Make handlers faster, fetch fewer records (max.poll.records) "
                "or raise the group's share.record.lock.duration.ms",
                pending,
                age,
                lock,
            )
