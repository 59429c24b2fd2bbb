"""PartitionTable's memory: clean keys are dropped past ``cached_keys`` and read from the
file again; dirty keys (not in the file yet) always stay, and many of them do not make
every read rebuild the cache."""

from __future__ import annotations

import logging
import threading
from pathlib import Path
from typing import Any

import pytest

from laneway.state.files.base import StateBackend, file_name
from laneway.state.files.checks import UnusableFile
from laneway.state.table import FileReplaced, PartitionTable

BACKENDS = pytest.mark.parametrize("backend", list(StateBackend), ids=lambda b: b.value)


@BACKENDS
def test_reads_past_cached_keys_come_back_from_the_file(
    backend: StateBackend, tmp_path: Path
) -> None:
    table = PartitionTable(tmp_path / file_name(backend, 0), {"group": "g"}, 10, backend)
    table.load((b"k%d" % i, b"%d" % i, i) for i in range(100))
    for i in range(100):
        assert table.get(b"k%d" % i) == (b"%d" % i, i)
    assert len(table.cached) <= 10
    assert table.evictions == 9
    table.close()


@BACKENDS
def test_dirty_keys_stay_and_do_not_rebuild_the_cache_on_every_read(
    backend: StateBackend, tmp_path: Path
) -> None:
    table = PartitionTable(tmp_path / file_name(backend, 0), {"group": "g"}, 10, backend)
    for i in range(50):  # changed, not yet in the changelog: they cannot be dropped
        table.put(b"d%d" % i, (b"x", i))
    for i in range(100):
        assert table.get(b"c%d" % i) == (None, -1)
    # One rebuild per cached_keys reads, not one per read (90 with the old rule).
    assert table.evictions == 9
    assert all(table.get(b"d%d" % i) == (b"x", i) for i in range(50))
    assert len(table.cached) <= 10 + 50
    table.flush(((b"d%d" % i, b"x", i) for i in range(50)), checkpoint=7)
    for i in range(200):
        table.get(b"c%d" % i)
    assert len(table.cached) <= 10  # once written, they may go
    assert table.get(b"d3") == (b"x", 3)  # from the file
    table.close()


@BACKENDS
def test_a_file_that_cannot_be_used_is_set_aside_and_a_new_one_made(
    backend: StateBackend, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / file_name(backend, 0)
    path.write_bytes(b"not a state file at all" * 400)
    table = PartitionTable(path, {"group": "g"}, 10, backend)
    with caplog.at_level(logging.WARNING, logger="laneway.state"):
        assert table.why_full is not None and "could not be used" in table.why_full
    [aside] = [p for p in tmp_path.glob(f"{path.name}.set-aside-*") if p.name.endswith("Z")]
    assert aside.read_bytes() == b"not a state file at all" * 400  # kept, not deleted
    assert f"state file {path} cannot be used" in caplog.text and str(aside) in caplog.text
    assert table.path == path and table.generation == 1
    table.load([(b"a", b"1", 1)])
    table.restored(5, table.generation)
    assert table.get(b"a") == (b"1", 1) and table.checkpoint == 5
    table.close()


class Failing:
    """A real state file that reports itself unusable from the next call on (the table's
    reaction is what is tested; what finds real damage is tested in test_damaged_files)."""

    def __init__(self, file: Any) -> None:
        self._file = file

    def __getattr__(self, name: str) -> Any:
        if name == "close":
            return self._file.close
        raise UnusableFile("DatabaseError: database disk image is malformed")


@BACKENDS
def test_a_file_that_fails_while_in_use_is_restored_again_and_reads_wait(
    backend: StateBackend, tmp_path: Path
) -> None:
    """Damage found while handlers use the table: the file set aside, a new one made, the
    keeper told; reads of keys not in memory wait until the new file is restored, what was
    only in memory stays, and no checkpoint is taken meanwhile."""
    path = tmp_path / file_name(backend, 0)
    told: list[PartitionTable] = []
    table = PartitionTable(path, {"group": "g"}, 100, backend, on_replaced=told.append)
    table.load((b"k%d" % i, b"%d" % i, i) for i in range(20))
    table.restored(20, table.generation)
    table.put(b"dirty", (b"x", 99))
    table._local.file = Failing(table._local.file)  # type: ignore[assignment]
    table.flush([(b"k1", b"1", 1)], checkpoint=21)
    assert told == [table] and table.generation == 1
    assert list(tmp_path.glob(f"{path.name}.set-aside-*"))
    read: list[object] = []
    reader = threading.Thread(target=lambda: read.append(table.get(b"k3")))
    reader.start()
    reader.join(0.3)
    assert reader.is_alive() and not read  # waits for the restore
    table.flush([(b"k2", b"2", 2)], checkpoint=22)  # entries yes, a checkpoint no
    assert table.checkpoint == 0
    table.load((b"k%d" % i, b"%d" % i, i) for i in range(20))
    table.restored(20, table.generation)
    reader.join(5)
    assert read == [(b"3", 3)]
    assert table.get(b"dirty") == (b"x", 99)
    assert table.checkpoint == 20
    table.close()


@BACKENDS
def test_a_restore_whose_file_was_replaced_meanwhile_starts_again(
    backend: StateBackend, tmp_path: Path
) -> None:
    table = PartitionTable(tmp_path / file_name(backend, 0), {"group": "g"}, 100, backend)
    generation = table.generation
    table._local.file = Failing(table._local.file)  # type: ignore[assignment]
    with pytest.raises(FileReplaced):
        table.load([(b"a", b"1", 1)])
    with pytest.raises(FileReplaced):
        table.restored(1, generation)  # begun before the file was replaced
    table.load([(b"a", b"1", 1)])
    table.restored(1, table.generation)
    assert table.get(b"a") == (b"1", 1)
    table.close()


@BACKENDS
def test_changes_written_without_a_checkpoint_count_in_what_the_file_holds(
    backend: StateBackend, tmp_path: Path
) -> None:
    """When the changelog's end cannot be read (the topic deleted, say), a checkpoint's
    changes go to the file without a new checkpoint, and the file counts them: the
    changelog held at least one record per change past the checkpoint."""
    path = tmp_path / file_name(backend, 0)
    table = PartitionTable(path, {"group": "g"}, 100, backend)
    table.restored(10, table.generation)
    assert (table.checkpoint, table.held) == (10, 10)
    table.flush([(b"a", b"1", 1), (b"b", b"1", 2)], checkpoint=None)
    table.flush([(b"a", b"2", 3)], checkpoint=None)
    assert (table.checkpoint, table.held) == (10, 13)
    table.close()
    table = PartitionTable(path, {"group": "g"}, 100, backend)
    assert (table.checkpoint, table.held) == (10, 13)
    table.flush([], checkpoint=20)
    assert (table.checkpoint, table.held) == (20, 20)
    table.close()
