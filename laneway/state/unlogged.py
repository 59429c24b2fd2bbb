"""UnloggedChanges: state changes not yet in the changelog, written before each commit.

A stateful call that changes its key's state and returns nothing else keeps the change in
its :class:`~laneway.state.table.PartitionTable` only (:meth:`PartitionTable.keep`) and
its message finishes at once (see :mod:`laneway.state.handler`). Before every commit,
:meth:`UnloggedChanges.log` writes each key's latest such change to the changelog and
waits for the acknowledgement (with exactly-once they go into the open transaction), so no
offset is committed before its message's change is in the changelog; a commit it cannot
make safe is skipped. A key's unlogged change is also written at once, ahead of the key's
next change that travels with results (:meth:`UnloggedChanges.before`): the changelog
then ends with the key's newest state, which compaction keeps.

The writes go through the consumer's result writer, each under a stand-in
(:class:`_Logged`) where it expects a message; :meth:`UnloggedChanges.sort_out` takes the
stand-ins out of what it hands back.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from typing import cast

from laneway.errors import SourceError
from laneway.logs import get_logger
from laneway.producing.result_writers import ACKNOWLEDGEMENT_WAIT, ResultWriter
from laneway.results import Produce
from laneway.state.changelog_watch import ChangelogWatch
from laneway.state.records import Entry, changelog_record
from laneway.state.table import PartitionTable
from laneway.types import Failure, Message, PartitionId

log = get_logger(__name__)

LOG_WAIT_S = 10.0
"""How long :meth:`UnloggedChanges.log` waits for the changelog's acknowledgement before
the commit it comes before is skipped (the changes are waited for again before the next)."""
FAILING_WAIT_S = 1.0
"""How long it waits when the changelog writes of every partition waited for are failing
already (a changelog topic deleted, say): the commit is skipped sooner, and the control
loop is not held 10 s at every commit."""


class _Logged:
    """Stands for unlogged changes on their way to the changelog where the result writer
    expects a message: they are acknowledged when it settles."""

    __slots__ = ("changes", "partition")

    def __init__(self, partition: int, changes: dict[bytes, Entry]) -> None:
        self.partition = partition
        self.changes = changes


class UnloggedChanges:
    """The unlogged changes of a consumer's tables on their way to the changelog (see the
    module docs). ``inner`` is the consumer's result writer, ``tables`` the keeper's
    (owned partitions of input ``topic``); ``acknowledged(partition, changes)`` is told of
    the changes the changelog acknowledged; ``watch`` is told of a partition whose changes
    it refused or did not acknowledge in time (and while every partition waited for is
    failing, a commit waits :data:`FAILING_WAIT_S` at most).
    Tuning: the wait before each commit is about one changelog round trip; a longer
    ``commit_interval`` pays it less often and writes a hot key less often."""

    def __init__(
        self,
        inner: ResultWriter,
        tables: Mapping[PartitionId, PartitionTable],
        topic: str,
        changelog: str,
        acknowledged: Callable[[int, dict[bytes, Entry]], None],
        watch: ChangelogWatch,
    ) -> None:
        self._inner = inner
        self._tables = tables
        self._topic = topic
        self._changelog = changelog
        self._acknowledged = acknowledged
        self._watch = watch
        self._in_flight: set[_Logged] = set()
        self._refused = 0
        """Keys whose change failed to be written since the last :meth:`log`."""
        self._carried: tuple[list[Message], list[Failure]] = ([], [])
        """What the result writer settled while :meth:`log` waited, for the next poll."""

    @property
    def carried(self) -> int:
        """Messages settled or failed while :meth:`log` waited, not handed back yet."""
        return len(self._carried[0]) + len(self._carried[1])

    @property
    def partitions_in_flight(self) -> set[int]:
        """Partitions with changes written and not yet acknowledged."""
        return {logged.partition for logged in self._in_flight}

    def log(self, timeout: float = LOG_WAIT_S) -> None:
        """Write every unlogged change and wait until all are acknowledged; SourceError
        when they are not within ``timeout`` seconds, or one could not be written (it is
        unlogged again, for the next call)."""
        for (_, partition), table in self._tables.items():
            if table.unlogged:
                self._write(partition, table.take_unlogged())
        waited = self.partitions_in_flight
        if waited and all(self._watch.failing(partition) for partition in waited):
            timeout = min(timeout, FAILING_WAIT_S)  # failing already: no 10 s per commit
        deadline = time.monotonic() + timeout
        while self._in_flight:
            settled, failed = self.sort_out(*self._inner.poll())
            self._carried = (self._carried[0] + settled, self._carried[1] + failed)
            if not self._in_flight:
                break
            if time.monotonic() >= deadline:
                keys = sum(len(logged.changes) for logged in self._in_flight)
                for partition in self.partitions_in_flight:
                    self._watch.failed(partition, f"not acknowledged in {timeout:g} s")
                raise SourceError(
                    f"state changes of {keys} keys not acknowledged by the changelog "
                    f"{self._changelog} in {timeout:g} s"
                )
            time.sleep(ACKNOWLEDGEMENT_WAIT)
        if self._refused:
            keys, self._refused = self._refused, 0
            raise SourceError(
                f"state changes of {keys} keys could not be written to the changelog "
                f"{self._changelog}; they are written again before the next commit"
            )

    def before(self, table: PartitionTable, partition: int, records: Sequence[Produce]) -> None:
        """Write the unlogged changes of these changelog ``records``' keys now, ahead of
        them."""
        changelog = self._changelog
        for record in records:
            if record[0] == changelog:
                earlier = table.take_unlogged(record[2])
                if earlier:
                    self._write(partition, earlier)

    def sort_out(
        self, settled: list[Message], failed: list[Failure]
    ) -> tuple[list[Message], list[Failure]]:
        """``settled`` and ``failed`` (from the result writer's poll) without the
        stand-ins: those acknowledged are done, those that failed unlogged again."""
        in_flight = self._in_flight
        if not in_flight:
            return settled, failed
        kept: list[Message] = []
        for item in cast(list[object], settled):
            if isinstance(item, _Logged):
                in_flight.discard(item)
                self._acknowledged(item.partition, item.changes)
            else:
                kept.append(cast(Message, item))
        unwritten: list[Failure] = []
        for failure in failed:
            logged = cast(object, failure.message)
            if isinstance(logged, _Logged):
                in_flight.discard(logged)
                self._refuse(logged, failure.error_message)
            else:
                unwritten.append(failure)
        return kept, unwritten

    def take_carried(self) -> tuple[list[Message], list[Failure]]:
        """What :meth:`log` kept from the result writer's polls, handed back once."""
        carried, self._carried = self._carried, ([], [])
        return carried

    def _write(self, partition: int, changes: dict[bytes, Entry]) -> None:
        changelog = self._changelog
        records = [
            changelog_record(changelog, partition, key, value, offset)
            for key, (value, offset) in changes.items()
        ]
        logged = _Logged(partition, changes)
        self._in_flight.add(logged)
        self._inner.write([(cast(list[Message], [logged]), records)])

    def _refuse(self, logged: _Logged, error: str) -> None:
        table = self._tables.get((self._topic, logged.partition))
        if table is None:
            return  # given up: its changes are the next owner's to make again
        table.unlog(logged.changes)
        self._refused += len(logged.changes)
        self._watch.failed(logged.partition, error)
        log.warning(
            "state of %s[%d]: %d state changes could not be written (%s); written again "
            "before the next commit",
            self._topic, logged.partition, len(logged.changes), error,
        )  # fmt: skip
