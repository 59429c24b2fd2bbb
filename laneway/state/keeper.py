"""StateKeeper: a stateful consumer's state while it runs, as its control plane sees it.

The control plane asks it (each on the control thread):

* at start, once the source has opened, :meth:`open`: the changelog checked (or created)
  against the input topic;
* for its result writer and transaction, :meth:`results` and :meth:`transaction` (see
  :mod:`laneway.state.writer`);
* on assignment, :meth:`assigned`: each new partition is paused and restored on the
  :class:`~laneway.state.restore.Restorer`'s thread; its messages already fetched are held
  back by :meth:`admit` (the other partitions' pass);
* every loop turn, :meth:`pump`: restored partitions get their table (handlers may run on
  them now), are resumed, and their held messages come back to be dispatched (a failed
  restore is made again later, in full, by the restorer); a partition whose restore is
  refused (see :class:`~laneway.state.restore.ChangelogBehind`) ends the run with that
  ConfigError; a partition whose file had to be replaced while it ran is held and paused
  again until its table is restored in full (see :mod:`laneway.state.table`);
* on revocation or loss, :meth:`give_up`; at the end, :meth:`close`.

Progress shows in the logs and in :meth:`restoring`: ``stats().restoring``, the ``restoring``
list of ``/readyz`` and ``/livez``, and the ``laneway_state_restor*`` gauges.
"""

from __future__ import annotations

import queue
import time
from collections.abc import Callable, Collection, Mapping
from typing import Any, NamedTuple, cast

from laneway.config import ConsumerConfig
from laneway.errors import ConfigError
from laneway.logs import get_logger
from laneway.options import EngineKind
from laneway.producing.result_writers import ResultWriter
from laneway.producing.transactions import Transaction
from laneway.sources.base import Source
from laneway.state.changelog import ChangelogLog, EmbeddedChangelog, check_changelog
from laneway.state.handler import stateful
from laneway.state.restore import RestoreJob, Restorer
from laneway.state.shipping import ShippedState
from laneway.state.store import StateStore
from laneway.state.table import PartitionTable
from laneway.state.writer import ChangelogResults
from laneway.types import CommitPosition, Message, NotDurable, PartitionId, Restore

log = get_logger(__name__)

REPAUSE_EVERY = 0.1
"""Seconds between pauses of the partitions being restored (backpressure may resume them)."""


class StateFigures(NamedTuple):
    """What a consumer's stats, probes and gauges show of its state (the fields of
    ``stats()`` of the same names)."""

    restoring: tuple[Restore, ...]
    """The partitions being restored (see :meth:`StateKeeper.restoring`)."""
    not_durable: tuple[NotDurable, ...]
    """The partitions whose changes have failed to reach the changelog for a while (see
    :mod:`laneway.state.changelog_watch`)."""


NO_STATE = StateFigures((), ())
"""The figures of a consumer without a store."""


def state_keeper(config: ConsumerConfig, source: Source, traced: bool) -> StateKeeper:
    """The keeper of ``config.state`` for a consumer of ``source``; ``traced``: the consumer
    traces its messages. Its changelog is checked by :meth:`StateKeeper.open`, once the
    source has opened (so an unreachable cluster or a missing input topic is reported as
    for any consumer, first)."""
    store = cast(StateStore, config.state)
    return StateKeeper(store, source, config.exactly_once, traced)


def changelog_log(source: Source, exactly_once: bool) -> ChangelogLog:
    """The :class:`~laneway.state.changelog.ChangelogLog` of ``source``'s log."""
    log_ = getattr(source, "log", None)
    if log_ is not None:
        return EmbeddedChangelog(log_)
    connection = getattr(source, "connection", None)
    if connection is not None:
        from laneway.state.kafka_changelog import KafkaChangelog

        return KafkaChangelog(connection, exactly_once)
    raise ConfigError(
        f"state= needs a source on a partitioned log (an EmbeddedLog or a KafkaSource), "
        f"not {source!r}"
    )


def input_topic(source: Source) -> str:
    """The one topic a stateful consumer reads (a ConfigError for several)."""
    topics = tuple(getattr(source, "topics", ()))
    if len(topics) != 1 or topics[0].startswith("^"):
        raise ConfigError(
            f"state= needs a source of exactly one topic (its changelog is co-partitioned "
            f"with it), not {list(topics)}; use one consumer (and store) per topic"
        )
    return str(topics[0])


class StateKeeper:
    """A consumer's :class:`~laneway.state.store.StateStore` at work (see the module docs)."""

    def __init__(
        self, store: StateStore, source: Source, exactly_once: bool, traced: bool = False
    ) -> None:
        self.store = store
        self._traced = traced
        self._source = source
        self._exactly_once = exactly_once
        self.topic = input_topic(source)
        self._log = changelog_log(source, exactly_once)
        self.tables: dict[PartitionId, PartitionTable] = {}
        """The tables of the partitions restored and owned (handlers read it)."""
        self._restorer = Restorer(self._log, store.changelog, store.when_changelog_behind)
        self._held: dict[PartitionId, list[Message]] = {}
        self._replaced: queue.SimpleQueue[PartitionId] = queue.SimpleQueue()
        """Owned partitions whose file was replaced while they ran (told from any thread)."""
        self._repause_at = 0.0
        self._writer: ChangelogResults | None = None

    def open(self) -> None:
        """Check the changelog (creating it when missing, if the store may)."""
        check_changelog(self._log, self.store.changelog, self.topic, self.store.create_changelog)

    def handler(
        self,
        handler: Callable[..., Any],
        value: Callable[[bytes], object] | None,
        key: Callable[[bytes], object] | None,
        engine: EngineKind,
        batched: bool,
    ) -> Callable[..., Any]:
        """What ``engine`` calls for the stateful ``handler`` (see
        :mod:`laneway.state.handler` and :mod:`laneway.state.shipping`)."""
        codec, changelog = self.store.codec, self.store.changelog
        if engine is EngineKind.PROCESS:
            return ShippedState(handler, value, key, codec, changelog, self.tables)
        return stateful(
            handler,
            self.tables,
            codec,
            changelog,
            typed=value is not None or key is not None,
            batched=batched,
            is_async=engine is EngineKind.ASYNC,
            on_control_thread=engine is EngineKind.SYNC,
            unlogged=not self._traced,  # a traced change goes with its message's trace
        )

    def results(self, inner: ResultWriter) -> ResultWriter:
        """The consumer's result writer, keeping the state files in step (see
        :class:`~laneway.state.writer.ChangelogResults`)."""
        changelog = self.store.changelog

        def end_of(partition: int) -> int:
            return self._log.bounds(changelog, partition)[1]

        self._writer = ChangelogResults(
            inner,
            self.tables,
            self.topic,
            changelog,
            end_of,
            self._exactly_once,
            self.store.checkpoint_interval,
        )
        return self._writer

    def transaction(self, inner: Transaction) -> Transaction:
        """The consumer's transaction, telling the writer of each commit."""
        return _Checkpointing(inner, self)

    def committed(self) -> None:
        if self._writer is not None:
            self._writer.committed()

    def log_changes(self) -> None:
        """Before a commit: every state change kept unlogged written to the changelog and
        acknowledged (see :meth:`ChangelogResults.log_changes`)."""
        if self._writer is not None:
            self._writer.log_changes()

    # -- ownership -------------------------------------------------------------------

    def assigned(self, positions: Mapping[PartitionId, CommitPosition | None]) -> None:
        new = [pid for pid in positions if pid not in self.tables and pid not in self._held]
        for pid in new:
            if pid[0] != self.topic:
                continue
            table = self.store.table(pid, self._source.group, self._recover(pid))
            self._held[pid] = []
            self._restorer.restore(RestoreJob(pid, table, pid[1]))
        if new:
            self._source.pause(new)

    def _recover(self, pid: PartitionId) -> Callable[[PartitionTable], None]:
        """What ``pid``'s table calls when its file was replaced while handlers used it:
        a full restore into the new file, and the partition held meanwhile."""

        def recover(table: PartitionTable) -> None:
            self._restorer.restore(RestoreJob(pid, table, pid[1]))
            self._replaced.put(pid)

        return recover

    def admit(self, messages: list[Message]) -> list[Message]:
        """``messages`` less those of partitions being restored (held until restored)."""
        held = self._held
        if not held:
            return messages
        kept = []
        for message in messages:
            waiting = held.get((message[0], message[1]))
            if waiting is None:
                kept.append(message)
            else:
                waiting.append(message)
        return kept

    def pump(self, now: float) -> tuple[list[PartitionId], list[Message]]:
        """Partitions restored since the last call (to resume) and their held messages; a
        refused restore raises its ConfigError."""
        self._hold_replaced()
        if not self._held:
            return [], []
        ready: list[PartitionId] = []
        released: list[Message] = []
        refused: ConfigError | None = None
        for job in self._restorer.finished():
            if job.refused is not None:
                job.table.close()  # the file is left as it is
                refused = refused or job.refused
                continue
            if job.pid not in self._held:  # given up meanwhile
                if self.tables.get(job.pid) is not job.table:
                    job.table.close()
                continue
            self.tables[job.pid] = job.table
            ready.append(job.pid)
            released += self._held.pop(job.pid)
        if refused is not None:
            log.error("stopping: %s", refused)
            raise refused
        if ready:
            self._source.resume(ready)
        if self._held and now >= self._repause_at:
            self._repause_at = now + REPAUSE_EVERY
            self._source.pause(self._held)
        return ready, released

    def _hold_replaced(self) -> None:
        """Hold and pause the owned partitions whose file was replaced while they ran,
        until their table is restored again."""
        held = []
        while True:
            try:
                pid = self._replaced.get_nowait()
            except queue.Empty:
                break
            if pid in self.tables and pid not in self._held:
                self._held[pid] = []
                held.append(pid)
        if held:
            self._source.pause(held)

    def take_back(self, partitions: Collection[PartitionId]) -> list[Message]:
        """The held messages of ``partitions`` (being given up), never started."""
        back: list[Message] = []
        for pid in partitions:
            back += self._held.get(pid, ())
            if pid in self._held:
                self._held[pid] = []
        return back

    def give_up(self, partitions: Collection[PartitionId], drained: bool) -> None:
        """Partitions no longer owned: restores stopped, tables closed (with ``drained``,
        after a last checkpoint)."""
        mine = [pid for pid in partitions if pid[0] == self.topic]
        for pid in mine:
            self._held.pop(pid, None)
            job = self._restorer.cancel(pid)
            if job is not None:
                job.table.close()
        if self._writer is not None:
            self._writer.release([p for _, p in mine if (self.topic, p) in self.tables], drained)
        for pid in mine:
            table = self.tables.pop(pid, None)
            if table is not None:
                table.close()

    def restoring(self) -> tuple[Restore, ...]:
        """The partitions being restored (or waiting to restore again after a failure),
        by partition, with their progress; safe to call from any thread."""
        jobs = self._restorer.running
        now = time.monotonic()
        return tuple(
            Restore(pid[0], pid[1], job.records, job.total, job.full, now - job.started)
            for pid, job in sorted(jobs.items())
        )

    def figures(self) -> StateFigures:
        """What stats, probes and gauges show (safe to call from any thread)."""
        watch = None if self._writer is None else self._writer.watch
        return StateFigures(self.restoring(), () if watch is None else watch.not_durable())

    def close(self, drained: bool) -> None:
        self.give_up(list(self.tables) + list(self._held), drained)
        self._restorer.close()
        self._log.close()


class _Checkpointing:
    """A transaction that tells the keeper when it committed (exactly-once checkpoints)."""

    def __init__(self, inner: Transaction, keeper: StateKeeper) -> None:
        self._inner = inner
        self._keeper = keeper

    def produce(self, record: Any) -> None:
        self._inner.produce(record)

    def commit(self, positions: Mapping[PartitionId, CommitPosition]) -> None:
        self._inner.commit(positions)
        self._keeper.committed()

    def poll(self) -> None:
        self._inner.poll()

    def close(self) -> None:
        self._inner.close()

    def __getattr__(self, name: str) -> Any:
        return getattr(cast(Any, self._inner), name)
