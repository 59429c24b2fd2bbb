"""ChangelogResults: state changes written through the results path, and the state files
kept in step with what the changelog acknowledged.

A stateful handler's change travels as one more result record (see
:mod:`laneway.state.records`), so a message is finished only once its state change is
acknowledged by the changelog (or, with ``exactly_once=True``, committed in the same
transaction as its offset and its results): :class:`ChangelogResults` wraps the consumer's
:class:`~laneway.producing.result_writers.ResultWriter` and adds two things.

* **Results first** (at-least-once). A message that changed state *and* returned results
  has its results written first and its state change only once they are acknowledged: a
  replayed message whose state change is in the changelog is not applied again, so its
  results must already be durable then. The state record written is the key's state at
  that moment (it reflects the message; later messages of the key may already be in it).
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
from collections.abc import Callable, Collection

from laneway.engines.base import ResultGroup
from laneway.logs import get_logger
from laneway.producing.result_writers import ResultWriter
from laneway.results import Produce, Records
from laneway.state.records import Entry, change_of, changelog_record
from laneway.state.table import PartitionTable
from laneway.types import Failure, Message, PartitionId

log = get_logger(__name__)


class _Later:
    """A result group whose state records wait for its other records' acknowledgement."""

    __slots__ = ("left", "messages", "records")

    def __init__(self, messages: list[Message], records: list[Produce]) -> None:
        self.messages = messages
        self.records = records
        self.left = len(messages)


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
        self._later: dict[int, _Later] = {}
        """Groups whose state records wait, by ``id`` of each of their messages."""
        self._held: list[ResultGroup] = []
        """Groups waiting for the barrier to end."""
        self._barrier = False
        self.tainted: set[int] = set()
        """Partitions with a state change that could not be written (no more checkpoints)."""

    @property
    def pending(self) -> int:
        return self._inner.pending + len(self._held) + len(self._later)

    def write(self, groups: list[ResultGroup]) -> None:
        if self._barrier:
            self._held += groups
            return
        changelog = self._changelog
        written = self._written
        tables, topic = self._tables, self._topic
        direct: list[ResultGroup] = []
        for messages, records in groups:
            last = records[-1]
            if last[0] != changelog:
                direct.append((messages, records))
                continue
            if (topic, messages[0][1]) not in tables:
                # Work of a partition given up while it ran (fenced: never committed). Its
                # state change must not reach the changelog after the new owner's.
                records = [r for r in records if r[0] != changelog]
                direct.append((messages, records))
                continue
            if len(records) == 1 or self._transactional:
                self._note(written, records)
                direct.append((messages, records))
                continue
            others = [r for r in records if r[0] != changelog]
            if not others:  # a batch's state changes alone
                self._note(written, records)
                direct.append((messages, records))
                continue
            later = _Later(messages, [r for r in records if r[0] == changelog])
            for message in messages:
                self._later[id(message)] = later
            direct.append((messages, others))
        self._inner.write(direct)

    def _note(self, written: dict[int, dict[bytes, Entry]], records: Records) -> None:
        changelog = self._changelog
        for record in records:
            if record[0] == changelog:
                partition, key, value, offset = change_of(record)
                changes = written.get(partition)
                if changes is None:
                    changes = written[partition] = {}
                changes[key] = (value, offset)

    def poll(self) -> tuple[list[Message], list[Failure]]:
        settled, failed = self._inner.poll()
        if self._later:
            settled = self._second_phase(settled)
        if failed:
            self._taint(failed)
        if not self._transactional:
            now = time.monotonic()
            if not self._barrier and now >= self._next and self._written:
                self._barrier = True
            if self._barrier and not self._inner.pending and not self._later:
                self._checkpoint(set(self._written))
                self._barrier = False
                self._next = now + self._interval
                held, self._held = self._held, []
                if held:
                    self.write(held)
        return settled, failed

    def _second_phase(self, settled: list[Message]) -> list[Message]:
        """Messages whose results are acknowledged: write their state records now (the
        key's state at this moment); the others are settled."""
        later, kept = self._later, []
        due: list[ResultGroup] = []
        for message in settled:
            waiting = later.pop(id(message), None)
            if waiting is None:
                kept.append(message)
                continue
            waiting.left -= 1
            if not waiting.left:
                records = [self._current(record) for record in waiting.records]
                self._note(self._written, records)
                due.append((waiting.messages, records))
        if due:
            self._inner.write(due)
        return kept

    def _current(self, record: Produce) -> Produce:
        """``record`` with its key's state as it is now (a later message of the key may have
        changed it since)."""
        change = change_of(record)
        table = self._tables.get((self._topic, change.partition))
        if table is None:
            return record
        value, offset = table.get(change.key)
        if offset <= change.offset:
            return record
        return changelog_record(record[0], change.partition, change.key, value, offset)

    def _taint(self, failed: list[Failure]) -> None:
        for failure in failed:
            message = failure.message
            later = self._later.pop(id(message), None)
            if later is not None:  # its results failed: its state record is not written
                for other in later.messages:
                    self._later.pop(id(other), None)
            if message.partition not in self.tainted:
                self.tainted.add(message.partition)
                log.warning(
                    "state of %s[%d]: a state change could not be written; its file takes no "
                    "more checkpoints until the partition is restored again",
                    self._topic,
                    message.partition,
                )

    def committed(self) -> None:
        """The transaction just committed (exactly-once): everything written is in the
        changelog."""
        self._checkpoint(set(self._written))

    def release(self, partitions: Collection[int], drained: bool) -> None:
        """Partitions given up: with ``drained`` (nothing of theirs unsettled, so every state
        change written for them is acknowledged) their files take a last checkpoint."""
        if drained and not self._transactional:
            self._checkpoint(set(partitions) & set(self._written))
        for partition in partitions:
            self._written.pop(partition, None)
            self.tainted.discard(partition)

    def _checkpoint(self, partitions: set[int]) -> None:
        for partition in partitions:
            changes = self._written.pop(partition, {})
            table = self._tables.get((self._topic, partition))
            if table is None or partition in self.tainted:
                continue
            table.flush(((k, v, o) for k, (v, o) in changes.items()), self._end_of(partition))

    def close(self, timeout: float) -> None:
        self._inner.close(timeout)
