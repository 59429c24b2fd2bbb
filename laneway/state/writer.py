"""ChangelogResults: state changes written through the results path, and the state files
kept in step with what the changelog acknowledged.

No offset is committed before its message's state change is acknowledged by the
changelog (or, with ``exactly_once=True``, committed in the same transaction as its
offset and its results). A change travels one of two ways:

* **Unlogged** (a call that returned nothing else, see :mod:`laneway.state.handler`): the
  message finishes at once and the change waits in its table; before every commit
  :meth:`ChangelogResults.log_changes` writes each key's latest unlogged change and waits
  for the changelog's acknowledgement (about a round trip per ``commit_interval``), and a
  commit it could not make safe is skipped. This is the cheap way: no record, result
  group or acknowledgement per message.
* **With the call's results**, as one more result record (see
  :mod:`laneway.state.records`): the message is finished once it is acknowledged. A
  key's unlogged change is written before its next record of this kind, so that the
  changelog ends with the key's newest state.

:class:`ChangelogResults` wraps the consumer's
:class:`~laneway.producing.result_writers.ResultWriter` for both, and keeps these rules:

* **One record per key per round** (coalescing). The changelog keeps only each key's
  latest state, so the state changes of one key handed over together (one control-loop
  turn's worth, a few hundred to a few thousand messages under load) are written as one
  record, the last one's, which reflects all of them: the messages behind it are finished
  when it is acknowledged. A hot key costs one write per turn instead of one per
  message; a key that fails to be written fails the messages of that turn behind it.
* **Results first** (at-least-once). A message that changed state *and* returned results
  has its results written first and its state change only once they are acknowledged: a
  replayed message whose state change is in the changelog is not applied again, so its
  results must already be durable then. Until then its key's later state changes wait
  behind it (they reflect its change too), so a key's records reach the changelog in
  offset order, each reflecting only messages whose results are durable, and compaction
  (which keeps a key's last record) keeps the newest.
* **The files follow the changelog.** Each state file holds only what the changelog has
  (:mod:`laneway.state.table`). At-least-once: every ``checkpoint_interval`` seconds new
  groups wait (a *barrier*, about one round of writes) until nothing written is
  unacknowledged; then every state change written since the last checkpoint is written
  to its partition's file with the changelog's end as the new checkpoint. Exactly-once:
  the same right after each transaction commits. A partition some of whose state changes
  could not be written (given up after ``max_retries``) takes no checkpoint until it is
  restored again.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Collection, Iterable

from laneway.engines.base import ResultGroup
from laneway.logs import get_logger
from laneway.producing.result_writers import ResultWriter
from laneway.results import Produce
from laneway.state.changelog_watch import ChangelogWatch
from laneway.state.coalescing import Later, Round, Slot, Unit
from laneway.state.records import Entry, change_of
from laneway.state.table import PartitionTable
from laneway.state.unlogged import LOG_WAIT_S, UnloggedChanges
from laneway.types import Failure, Message, PartitionId

log = get_logger(__name__)


class ChangelogResults:
    """A :class:`~laneway.producing.result_writers.ResultWriter` that also keeps the state
    files (see the module docs).

    ``tables`` are the owned partitions' state (the keeper's dict), ``topic`` the input
    topic, ``changelog`` the changelog topic, ``end_of`` the changelog partition's end
    offset; ``transactional``: the inner writer is exactly-once (checkpoints follow
    :meth:`committed`). Tuning: ``checkpoint_interval`` (shorter: less to read again after
    a crash, more barriers; each costs about a round of writes).
    """

    def __init__(
        self,
        inner: ResultWriter,
        tables: dict[PartitionId, PartitionTable],
        topic: str,
        changelog: str,
        end_of: Callable[[int], int],
        transactional: bool,
        checkpoint_interval: float,
    ) -> None:
        self._inner = inner
        self._tables = tables
        self._topic = topic
        self._changelog = changelog
        self._end_of = end_of
        self._transactional = transactional
        self._interval = checkpoint_interval
        self._next = time.monotonic() + checkpoint_interval
        self._written: dict[int, dict[bytes, Entry]] = {}
        """Per changelog partition, the latest state change written since the last
        checkpoint, by key."""
        self._queues: dict[Slot, deque[Unit]] = {}
        """Keys whose state records wait behind a unit not ready yet, in offset order."""
        self._later: dict[int, Later] = {}
        """Units waiting for their results, by ``id`` of each of their messages."""
        self._held: list[ResultGroup] = []
        """Groups waiting for the barrier to end."""
        self._barrier = False
        self.tainted: set[int] = set()
        """Partitions with a state change that could not be written with its results (no
        more checkpoints)."""
        self.watch = ChangelogWatch(topic, changelog)
        """Whether the partitions' changes reach the changelog (see
        :mod:`laneway.state.changelog_watch`)."""
        self._unlogged = UnloggedChanges(
            inner, tables, topic, changelog, self._acknowledged, self.watch
        )

    @property
    def pending(self) -> int:
        held = len(self._held) + len(self._later) + self._unlogged.carried
        return self._inner.pending + held

    def write(self, groups: list[ResultGroup]) -> None:
        if self._barrier:
            self._held += groups
            return
        changelog, transactional = self._changelog, self._transactional
        tables, topic, queues = self._tables, self._topic, self._queues
        direct: list[ResultGroup] = []
        merged = Round()
        for messages, records in groups:
            last = records[-1]
            if last[0] != changelog:
                direct.append((messages, records))
                continue
            table = tables.get((topic, messages[0][1]))
            if table is None:
                # Work of a partition given up while it ran (fenced: never committed). Its
                # state change must not reach the changelog after the new owner's.
                direct.append((messages, [r for r in records if r[0] != changelog]))
                continue
            if table.unlogged:  # an earlier message's change of the key goes first
                self._unlogged.before(table, messages[0][1], records)
            if len(records) == 1 and not queues:  # the common case: one key's change
                merged.add_one(messages, last)
                continue
            state = [r for r in records if r[0] == changelog]
            others = [r for r in records if r[0] != changelog]
            if others and not transactional:
                unit = Unit(messages, state, [], False)
                later = Later(unit)
                for message in messages:
                    self._later[id(message)] = later
                direct.append((messages, others))
            else:
                unit = Unit(messages, state, others, True)
            self._enqueue(unit, merged)
        self._inner.write(direct + self._merged(merged))

    def _enqueue(self, unit: Unit, merged: Round) -> None:
        """Write ``unit`` with this round, or queue it behind its keys' waiting units."""
        queues = self._queues
        if unit.ready and not any(slot in queues for slot in unit.slots):
            merged.add(unit)
            return
        for slot in unit.slots:
            queue = queues.get(slot)
            if queue is None:
                queue = queues[slot] = deque()
            queue.append(unit)

    def _release(self, slots: Iterable[Slot], merged: Round) -> None:
        """Move the ready units at the head of these keys' queues into ``merged``."""
        queues = self._queues
        work = list(slots)
        while work:
            slot = work.pop()
            queue = queues.get(slot)
            while queue and queue[0].ready:
                unit = queue[0]
                if any(queues[other][0] is not unit for other in unit.slots):
                    break  # a batch's unit also waits in another key's queue
                for other in unit.slots:
                    behind = queues[other]
                    behind.popleft()
                    if not behind:
                        del queues[other]
                    elif other != slot:
                        work.append(other)
                merged.add(unit)
                queue = queues.get(slot)

    def _merged(self, merged: Round) -> list[ResultGroup]:
        """The round's groups for the inner writer, state records of partitions no longer
        owned dropped (see :meth:`write`), the rest noted for the next checkpoint."""
        groups: list[ResultGroup] = []
        owned, topic, written = self._tables, self._topic, self._written
        for messages, extras, state in merged.groups:
            kept = [r for r in state if (topic, r[4]) in owned]
            self._note(written, kept)
            if messages:
                groups.append((messages, extras + kept))
        return groups

    def _note(self, written: dict[int, dict[bytes, Entry]], records: list[Produce]) -> None:
        for record in records:
            partition, key, value, offset = change_of(record)
            changes = written.get(partition)
            if changes is None:
                changes = written[partition] = {}
            known = changes.get(key)
            if known is None or known[1] <= offset:
                changes[key] = (value, offset)

    def _acknowledged(self, partition: int, acknowledged: dict[bytes, Entry]) -> None:
        """Unlogged changes the changelog acknowledged: for the next checkpoint (only
        those: a change it refused must not reach the file)."""
        changes = self._written.get(partition)
        if changes is None:
            changes = self._written[partition] = {}
        for key, entry in acknowledged.items():
            known = changes.get(key)
            if known is None or known[1] <= entry[1]:
                changes[key] = entry
        self.watch.reached((partition,))

    def log_changes(self, timeout: float = LOG_WAIT_S) -> None:
        """Before a commit: every unlogged change in the changelog (see
        :meth:`UnloggedChanges.log`)."""
        self._unlogged.log(timeout)

    def poll(self) -> tuple[list[Message], list[Failure]]:
        settled, failed = self._unlogged.sort_out(*self._inner.poll())
        if self._unlogged.carried:
            earlier, unwritten = self._unlogged.take_carried()
            settled, failed = earlier + settled, unwritten + failed
        if failed:
            self._taint(failed)
        if self._later:
            settled = self._second_phase(settled)
        if not self._transactional:
            now = time.monotonic()
            if not self._barrier and now >= self._next and self._written:
                self._barrier = True
            if self._barrier and not self._inner.pending and not self._later and not self._queues:
                self._checkpoint(set(self._written))
                self._barrier = False
                self._next = now + self._interval
                held, self._held = self._held, []
                if held:
                    self.write(held)
        return settled, failed

    def _second_phase(self, settled: list[Message]) -> list[Message]:
        """Messages whose results are acknowledged: their units are ready and written with
        those waiting behind them; the other messages are settled."""
        later, kept = self._later, []
        ready: list[Slot] = []
        for message in settled:
            waiting = later.pop(id(message), None)
            if waiting is None:
                kept.append(message)
                continue
            waiting.left -= 1
            if not waiting.left:
                waiting.unit.ready = True
                ready += waiting.unit.slots
        if ready:
            merged = Round()
            self._release(ready, merged)
            self._inner.write(self._merged(merged))
        return kept

    def _taint(self, failed: list[Failure]) -> None:
        dropped: list[Slot] = []
        for failure in failed:
            message = failure.message
            later = self._later.pop(id(message), None)
            if later is not None:  # its results failed: its state records are not written
                for other in later.unit.messages:
                    self._later.pop(id(other), None)
                unit = later.unit
                unit.messages, unit.records, unit.ready = [], [], True
                dropped += unit.slots
            self._spoiled(message.partition)
        if dropped:
            merged = Round()
            self._release(dropped, merged)
            self._inner.write(self._merged(merged))

    def _spoiled(self, partition: int) -> None:
        """A state change of ``partition`` could not be written: no more checkpoints (its
        file may hold the change already)."""
        if partition not in self.tainted:
            self.tainted.add(partition)
            log.warning(
                "state of %s[%d]: a state change could not be written; its file takes no "
                "more checkpoints until the partition is restored again",
                self._topic,
                partition,
            )

    def committed(self) -> None:
        """The transaction just committed (exactly-once): everything written is in the
        changelog."""
        self._checkpoint(set(self._written))

    def release(self, partitions: Collection[int], drained: bool) -> None:
        """Partitions given up: with ``drained`` (nothing of theirs unsettled, so every state
        change written for them is acknowledged) their files take a last checkpoint."""
        if drained and not self._transactional:
            # Acknowledged changes go to the file; the checkpoint moves only where no change
            # is still on its way (the changelog may hold it below its end).
            unsure = self._unlogged.partitions_in_flight
            self._checkpoint(set(partitions) & set(self._written), unsure)
        for partition in partitions:
            self._written.pop(partition, None)
            self.tainted.discard(partition)
        self.watch.forget(partitions)

    def _checkpoint(self, partitions: set[int], unsure: Collection[int] = ()) -> None:
        """Write each partition's changes written since the last checkpoint into its file,
        with the changelog's end as the new checkpoint (the changes alone when that end
        cannot be read, or for ``unsure`` partitions)."""
        for partition in partitions:
            changes = self._written.pop(partition, {})
            table = self._tables.get((self._topic, partition))
            if table is None or partition in self.tainted:
                continue
            end = None if partition in unsure else self._changelog_end(partition)
            try:
                table.flush(((k, v, o) for k, (v, o) in changes.items()), end)
            except Exception as error:  # a full disk: the changelog has it all
                self.tainted.add(partition)
                log.error(
                    "state of %s[%d]: its file could not take a checkpoint (%s: %s); it takes "
                    "no more until the partition is restored again (a restart restores it "
                    "from the changelog)",
                    self._topic, partition, type(error).__name__, error,
                )  # fmt: skip

    def _changelog_end(self, partition: int) -> int | None:
        """Where the changelog partition ends (``None``, said, when that cannot be read)."""
        try:
            return self._end_of(partition)
        except Exception as error:  # the changelog deleted, the cluster unreachable
            log.warning(
                "state of %s[%d]: the end of the changelog %s cannot be read (%s: %s); its "
                "file takes the changes without a new checkpoint",
                self._topic, partition, self._changelog, type(error).__name__, error,
            )  # fmt: skip
            return None

    def close(self, timeout: float) -> None:
        self._inner.close(timeout)
