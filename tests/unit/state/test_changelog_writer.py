"""ChangelogResults: one changelog record per key per round, written in offset order and only
for messages whose results are durable (a fake inner writer; the real one is covered by the
store contract suite and the chaos tests)."""

from __future__ import annotations

import pytest

from laneway.engines.base import ResultGroup
from laneway.errors import SourceError
from laneway.results import Produce
from laneway.state.records import change_of, changelog_record
from laneway.state.table import PartitionTable
from laneway.state.writer import ChangelogResults
from laneway.types import Failure, Message

TOPIC, CHANGELOG, OUT = "in", "in.state", "in.out"


class Inner:
    """Records what is written; settles or fails groups when the test says so."""

    def __init__(self) -> None:
        self.groups: list[ResultGroup] = []
        self.acknowledged: list[Message] = []
        self.failed: list[Failure] = []

    @property
    def pending(self) -> int:
        return 0

    def write(self, groups: list[ResultGroup]) -> None:
        self.groups += groups

    def poll(self) -> tuple[list[Message], list[Failure]]:
        done, failed = self.acknowledged, self.failed
        self.acknowledged, self.failed = [], []
        return done, failed

    def state_writes(self) -> list[tuple[list[int], list[tuple[bytes, bytes | None, int]]]]:
        """Each group holding changelog records: its messages' offsets and its changes."""
        writes = []
        for messages, records in self.groups:
            changes = [change_of(r) for r in records if r[0] == CHANGELOG]
            if changes:
                offsets = [m.offset for m in messages if isinstance(m, Message)]
                writes.append((offsets, [c[1:] for c in changes]))
        return writes

    def close(self, timeout: float) -> None:
        pass


def writer(transactional: bool = False) -> tuple[ChangelogResults, Inner]:
    inner = Inner()
    tables = {(TOPIC, 0): PartitionTable(None, {}, 100), (TOPIC, 1): PartitionTable(None, {}, 100)}
    return ChangelogResults(inner, tables, TOPIC, CHANGELOG, lambda p: 0, transactional, 60), inner


def message(offset: int, key: bytes, partition: int = 0) -> Message:
    return Message(TOPIC, partition, offset, key, b"v")


def change(m: Message, value: bytes) -> Produce:
    return changelog_record(CHANGELOG, m.partition, m.key or b"", value, m.offset)


def result(m: Message) -> Produce:
    return Produce(OUT, m.value, m.key)


def test_one_record_per_key_per_round_settles_every_message_behind_it() -> None:
    w, inner = writer()
    messages = [message(i, b"a" if i % 2 else b"b") for i in range(10)]
    w.write([([m], [change(m, b"%d" % m.offset)]) for m in messages])
    writes = sorted(inner.state_writes())
    assert writes == [([0, 2, 4, 6, 8], [(b"b", b"8", 8)]), ([1, 3, 5, 7, 9], [(b"a", b"9", 9)])]


def test_a_keys_later_change_waits_for_an_earlier_messages_results() -> None:
    w, inner = writer()
    first, second, other = message(0, b"a"), message(1, b"a"), message(2, b"z")
    w.write(
        [
            ([first], [result(first), change(first, b"1")]),
            ([second], [change(second, b"2")]),
            ([other], [change(other, b"9")]),
        ]
    )
    # The results go out; key a's state does not (both changes reflect the first message,
    # whose results are not durable); the unrelated key z's does.
    assert [r[0] for _, records in inner.groups for r in records].count(OUT) == 1
    assert inner.state_writes() == [([2], [(b"z", b"9", 2)])]
    assert w.poll() == ([], [])
    inner.acknowledged = [first]  # its results are durable now
    settled, _ = w.poll()
    assert settled == []  # not finished before its state change is
    assert inner.state_writes()[-1] == ([0, 1], [(b"a", b"2", 1)])


def test_failed_results_drop_only_that_messages_state_record() -> None:
    w, inner = writer()
    first, second = message(0, b"a"), message(1, b"a")
    w.write([([first], [result(first), change(first, b"1")]), ([second], [change(second, b"2")])])
    inner.failed = [Failure(first, "ProduceError", "refused", 1)]
    _, failed = w.poll()
    assert [f.message for f in failed] == [first]
    assert inner.state_writes() == [([1], [(b"a", b"2", 1)])]
    assert 0 in w.tainted  # the file takes no checkpoint past a lost change


def test_a_batch_spanning_keys_waits_for_every_key_and_keeps_their_order() -> None:
    w, inner = writer()
    first = message(0, b"a")
    batch = [message(1, b"a"), message(2, b"b")]
    after = message(3, b"b")
    w.write(
        [
            ([first], [result(first), change(first, b"1")]),
            (batch, [change(batch[0], b"2"), change(batch[1], b"3")]),
            ([after], [change(after, b"4")]),
        ]
    )
    assert inner.state_writes() == []  # b waits behind the batch, the batch behind a
    inner.acknowledged = [first]
    w.poll()
    assert inner.state_writes() == [
        ([0], [(b"a", b"1", 0)]),
        ([1, 2], [(b"a", b"2", 1), (b"b", b"3", 2)]),
        ([3], [(b"b", b"4", 3)]),
    ]


def test_state_of_a_partition_given_up_is_not_written() -> None:
    w, inner = writer()
    gone = message(0, b"a", partition=5)
    w.write([([gone], [change(gone, b"1")])])
    assert inner.groups == [([gone], [])]


def test_exactly_once_merges_results_and_state_in_one_group() -> None:
    w, inner = writer(transactional=True)
    first, second = message(0, b"a"), message(1, b"a")
    w.write([([first], [result(first), change(first, b"1")]), ([second], [change(second, b"2")])])
    assert len(inner.groups) == 1
    messages, records = inner.groups[0]
    assert messages == [first, second]
    assert [r[0] for r in records] == [OUT, CHANGELOG]
    assert change_of(records[-1]).value == b"2"


# -- unlogged changes (a call that changed state and returned nothing else) ----------------


class AutoAcknowledging(Inner):
    """Acknowledges every group written, as the embedded log does at once."""

    def write(self, groups: list[ResultGroup]) -> None:
        super().write(groups)
        for messages, _ in groups:
            self.acknowledged.append(messages[0])


def auto_writer() -> tuple[ChangelogResults, AutoAcknowledging, PartitionTable]:
    inner = AutoAcknowledging()
    table = PartitionTable(None, {}, 100)
    tables = {(TOPIC, 0): table, (TOPIC, 1): PartitionTable(None, {}, 100)}
    return ChangelogResults(inner, tables, TOPIC, CHANGELOG, lambda p: 0, False, 60), inner, table


def test_unlogged_changes_are_in_the_changelog_before_a_commit() -> None:
    w, inner, table = auto_writer()
    table.keep(b"a", (b"1", 3))
    table.keep(b"a", (b"2", 5))
    table.keep(b"b", (b"7", 4))
    w.log_changes()
    assert inner.state_writes() == [([], [(b"a", b"2", 5), (b"b", b"7", 4)])]
    assert table.unlogged == {}
    assert w.poll() == ([], [])  # the stand-ins are not messages
    assert w.pending == 0


def test_a_commit_waits_for_the_changelog_and_is_skipped_past_the_timeout() -> None:
    w, inner = writer()
    table = w._tables[(TOPIC, 0)]
    table.keep(b"a", (b"1", 3))
    with pytest.raises(SourceError, match=r"not acknowledged by the changelog in\.state"):
        w.log_changes(timeout=0.05)
    [(logged, _)] = inner.groups
    inner.acknowledged = [logged[0]]
    w.log_changes(timeout=0.05)  # nothing new: waits for the one outstanding only
    assert len(inner.groups) == 1


def test_a_change_the_changelog_refused_is_written_again_before_the_next_commit() -> None:
    w, inner = writer()
    table = w._tables[(TOPIC, 0)]
    table.keep(b"a", (b"1", 3))

    def refuse(groups: list[ResultGroup]) -> None:
        inner.groups.extend(groups)
        inner.failed.extend(Failure(m[0], "ProduceError", "refused", 1) for m, _ in groups)

    inner.write = refuse  # type: ignore[method-assign]
    with pytest.raises(SourceError, match="1 keys could not be written"):
        w.log_changes(timeout=1.0)
    assert table.unlogged == {b"a": (b"1", 3)}
    assert w.poll() == ([], [])
    inner.write = Inner.write.__get__(inner)  # type: ignore[method-assign]
    table.keep(b"b", (b"2", 4))
    with pytest.raises(SourceError, match="not acknowledged"):
        w.log_changes(timeout=0.05)  # a's again, and b's, now acknowledged:
    inner.acknowledged = [m[0] for m, _ in inner.groups[1:]]
    w.log_changes(timeout=0.05)
    table.keep(b"a", (b"5", 7))  # refused again: never acknowledged, never in the file
    inner.write = refuse  # type: ignore[method-assign]
    with pytest.raises(SourceError, match="1 keys could not be written"):
        w.log_changes(timeout=1.0)
    w.release([0], drained=True)  # the last checkpoint: what the changelog acknowledged only
    assert table._local.file.read(b"a") == (b"1", 3)
    assert table._local.file.read(b"b") == (b"2", 4)


def test_an_unlogged_change_reaches_the_changelog_before_its_keys_later_record() -> None:
    """A message with results after unlogged ones of its key: the unlogged change is
    written first, so the changelog (compaction keeps a key's last record) ends newest."""
    w, inner, table = auto_writer()
    table.keep(b"a", (b"1", 3))
    later = message(5, b"a")
    w.write([([later], [result(later), change(later, b"2")])])
    assert inner.state_writes()[0] == ([], [(b"a", b"1", 3)])
    w.poll()
    w.poll()
    writes = [changes for _, changes in inner.state_writes()]
    assert writes == [[(b"a", b"1", 3)], [(b"a", b"2", 5)]]
    assert table.unlogged == {}


def test_what_settles_while_a_commit_waits_is_handed_on_by_the_next_poll() -> None:
    w, inner, table = auto_writer()
    done = message(9, b"z")
    inner.acknowledged.append(done)
    table.keep(b"a", (b"1", 3))
    w.log_changes()
    assert w.pending == 1
    assert w.poll() == ([done], [])


def test_a_checkpoint_that_fails_is_logged_and_the_file_takes_no_more() -> None:
    """The file is only a cache of the changelog: a full disk must not end the run."""
    w, _ = writer(transactional=True)
    table = w._tables[(TOPIC, 0)]
    tries: list[object] = []

    def full(*args: object) -> None:
        tries.append(args)
        raise OSError(28, "No space left on device")

    table.flush = full  # type: ignore[method-assign,assignment]
    m = message(3, b"a")
    w.write([([m], [change(m, b"1")])])
    w.committed()
    assert w.tainted == {0}
    w.write([([message(4, b"a")], [change(message(4, b"a"), b"2")])])
    w.committed()
    assert len(tries) == 1  # no second try until the partition is restored again
