"""EmbeddedLog(path=...): restart, torn-write recovery, persisted commits and drops."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from topics import AssignmentListener

from laneway.errors import ConfigError, SourceError
from laneway.sources.embedded.log import EmbeddedLog, EmbeddedSource
from laneway.sources.embedded.segment import FILE_HEADER, CorruptLogError
from laneway.types import CommitPosition, Message


def read_all(log: EmbeddedLog, topic: str, group: str) -> tuple[EmbeddedSource, list[Message]]:
    source = log.subscribe([topic], group=group)
    source.open(AssignmentListener())
    out: list[Message] = []
    for _ in range(1000):
        got = source.poll(500, 0.0)
        if not got:
            break
        out += got
    return source, sorted(out, key=lambda m: (m.partition, m.offset))


def fields(messages: list[Message]) -> list[tuple[object, ...]]:
    return [tuple(m) for m in messages]


def fill(path: Path, count: int = 30) -> list[tuple[object, ...]]:
    with EmbeddedLog(path=path) as log:
        log.create_topic("orders", partitions=3)
        for i in range(count):
            key = None if i % 5 == 0 else b"acct-%d" % (i % 7)
            value = None if i == 7 else b"payload-%d" % i
            headers = [("trace", b"t%d" % i), ("empty", b""), ("none", None)] if i % 2 else None
            log.produce("orders", value, key=key, headers=headers, timestamp=1_000 + i)
        _, got = read_all(log, "orders", "audit")
        return fields(got)


def test_records_commits_and_offsets_survive_a_restart(tmp_path: Path) -> None:
    before = fill(tmp_path)
    with EmbeddedLog(path=tmp_path) as log:
        source, got = read_all(log, "orders", "billing")
        assert fields(got) == before
        assert log.topics() == ["orders"] and log.partitions("orders") == 3
        source.commit(
            {("orders", 0): CommitPosition(2, "meta ✓"), ("orders", 1): CommitPosition(1)}
        )
        ends = log.end_offsets("orders")
        source.close()
    with EmbeddedLog(path=tmp_path) as log:
        assert log.committed("billing", "orders") == {
            0: CommitPosition(2, "meta ✓"),
            1: CommitPosition(1),
        }
        assert log.end_offsets("orders") == ends
        assert log.produce("orders", b"next", partition=0) == (0, ends[0])
        source = log.subscribe(["orders"], group="billing")
        listener = AssignmentListener()
        source.open(listener)
        resumed = source.poll(1000, 0.0)
        assert listener.assigned[("orders", 0)] == CommitPosition(2, "meta ✓")
        assert listener.assigned[("orders", 2)] is None
        assert min(m.offset for m in resumed if m.partition == 0) == 2
        assert [m.value for m in resumed if m.partition == 0][-1] == b"next"
    with EmbeddedLog(path=tmp_path) as log:
        assert log.end_offsets("orders")[0] == ends[0] + 1


def test_restart_trims_below_the_committed_floor(tmp_path: Path) -> None:
    with EmbeddedLog(path=tmp_path) as log:
        log.create_topic("t")
        for i in range(10):
            log.produce("t", b"%d" % i)
        source, _ = read_all(log, "t", "only")
        source.commit({("t", 0): CommitPosition(6)})
    with EmbeddedLog(path=tmp_path) as log:
        assert log.start_offsets("t") == {0: 6}
        assert log.stats().partition_sizes == {("t", 0): 4}
        _, got = read_all(log, "t", "only")
        assert [m.value for m in got] == [b"6", b"7", b"8", b"9"]


@pytest.mark.parametrize(
    "damage",
    ["garbage", "truncated_frame", "truncated_length", "flipped_crc"],
)
def test_a_torn_tail_is_cut_off_with_a_warning(
    tmp_path: Path, damage: str, caplog: pytest.LogCaptureFixture
) -> None:
    before = fill(tmp_path)
    file = tmp_path / "orders" / "1.log"
    data = file.read_bytes()
    kept_records = [r for r in before if r[1] == 1]
    if damage == "garbage":
        file.write_bytes(data + b"\x07garbage-after-a-crash")
        cut = 22
    elif damage == "truncated_frame":
        file.write_bytes(data[:-3])
        kept_records.pop()
        cut = len(data) - 3 - _last_frame_start(data)
    elif damage == "truncated_length":
        file.write_bytes(data + b"\x10\x00")
        cut = 2
    else:
        damaged = bytearray(data)
        damaged[-1] ^= 0xFF
        file.write_bytes(bytes(damaged))
        kept_records.pop()
        cut = len(data) - _last_frame_start(data)
    with caplog.at_level(logging.WARNING, logger="laneway.sources.embedded.segment"):
        log = EmbeddedLog(path=tmp_path)
    with log:
        assert f"cut {cut} bytes" in caplog.text and "1.log" in caplog.text
        _, got = read_all(log, "orders", "check")
        assert fields([m for m in got if m.partition == 1]) == kept_records
        assert fields([m for m in got if m.partition != 1]) == [r for r in before if r[1] != 1]
        assert log.produce("orders", b"after", partition=1) == (1, len(kept_records))
    with EmbeddedLog(path=tmp_path) as log:
        _, got = read_all(log, "orders", "again")
        tail = [m for m in got if m.partition == 1]
        assert fields(tail[:-1]) == kept_records and tail[-1].value == b"after"


def _last_frame_start(data: bytes) -> int:
    position, last = len(FILE_HEADER), len(FILE_HEADER)
    while position < len(data):
        last = position
        position += 8 + int.from_bytes(data[position : position + 4], "little")
    return last


def test_a_file_torn_inside_its_header_is_started_afresh(tmp_path: Path) -> None:
    with EmbeddedLog(path=tmp_path) as log:
        log.create_topic("t", partitions=2)
        log.produce("t", b"x", partition=0)
    (tmp_path / "t" / "1.log").write_bytes(FILE_HEADER[:3])
    with EmbeddedLog(path=tmp_path) as log:
        assert log.end_offsets("t") == {0: 1, 1: 0}
        assert log.produce("t", b"y", partition=1) == (1, 0)
    assert (tmp_path / "t" / "1.log").read_bytes().startswith(FILE_HEADER)


def test_a_foreign_file_is_refused(tmp_path: Path) -> None:
    with EmbeddedLog(path=tmp_path) as log:
        log.create_topic("t")
    (tmp_path / "t" / "0.log").write_bytes(b"not a laneway log at all")
    with pytest.raises(CorruptLogError, match="not a laneway log file"):
        EmbeddedLog(path=tmp_path)
    (tmp_path / "t" / "0.log").unlink()
    with EmbeddedLog(path=tmp_path) as log:
        assert log.end_offsets("t") == {0: 0}


def test_drop_oldest_stays_dropped_after_a_restart(tmp_path: Path) -> None:
    with EmbeddedLog(path=tmp_path, capacity=2, when_full="drop_oldest") as log:
        log.create_topic("t")
        for i in range(5):
            log.produce("t", b"%d" % i)
        assert log.start_offsets("t") == {0: 3}
    with EmbeddedLog(path=tmp_path, capacity=2, when_full="drop_oldest") as log:
        assert (log.start_offsets("t"), log.end_offsets("t")) == ({0: 3}, {0: 5})
        _, got = read_all(log, "t", "g")
        assert [m.value for m in got] == [b"3", b"4"]


def test_produce_many_is_durable(tmp_path: Path) -> None:
    with EmbeddedLog(path=tmp_path) as log:
        log.create_topic("t", partitions=2)
        assert log.produce_many("t", [(b"k%d" % i, b"%d" % i) for i in range(100)]) == 100
    with EmbeddedLog(path=tmp_path) as log:
        _, got = read_all(log, "t", "g")
        assert sorted(int(m.value or b"") for m in got) == list(range(100))


def test_one_directory_one_log_and_topic_counts_are_kept(tmp_path: Path) -> None:
    log = EmbeddedLog(path=tmp_path)
    log.create_topic("t", partitions=4)
    with pytest.raises(SourceError, match="already open"):
        EmbeddedLog(path=tmp_path)
    log.close()
    log.close()
    with EmbeddedLog(path=tmp_path) as again:
        again.create_topic("t", partitions=4)
        with pytest.raises(ConfigError, match="exists with 4 partitions"):
            again.create_topic("t", partitions=2)
    leftovers = [p.name for p in tmp_path.rglob("*.tmp")]
    assert leftovers == []
