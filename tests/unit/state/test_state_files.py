"""Every state file backend keeps the same contract (laneway.state.files.base.StateFile):
rows with the highest offset per key, deleted values, named strings, clearing, counting,
and what it held after it is closed and opened again."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from laneway.state.files.base import StateBackend, StateFile, file_name, open_file

BACKENDS = list(StateBackend)


def reopened(backend: StateBackend, path: Path, file: StateFile) -> StateFile:
    file.close()
    return open_file(backend, path)


@pytest.mark.parametrize("backend", BACKENDS, ids=[b.value for b in BACKENDS])
def test_a_file_keeps_the_newest_row_per_key_and_its_names(
    backend: StateBackend, tmp_path: Path
) -> None:
    path = tmp_path / file_name(backend, 3)
    file = open_file(backend, path)
    assert file.meta() == {} and file.count() == 0 and file.read(b"a") is None
    file.write([(b"a", b"1", 5), (b"b", None, 6), (b"a", b"0", 4)], {"checkpoint": "7"})
    file.write([(b"a", b"2", 5), (b"c", b"", 1)], {"group": "g"})
    file = reopened(backend, path, file)
    assert file.read(b"a") == (b"2", 5)  # an equal offset replaces, a lower one does not
    assert file.read(b"b") == (None, 6)
    assert file.read(b"c") == (b"", 1)
    assert file.count() == 3
    assert file.meta() == {"checkpoint": "7", "group": "g"}
    file.clear()
    assert file.count() == 0 and file.meta() == {} and file.read(b"a") is None
    file.close()
    file.close()  # idempotent


@pytest.mark.parametrize("backend", BACKENDS, ids=[b.value for b in BACKENDS])
def test_the_empty_key_and_long_keys_are_kept(backend: StateBackend, tmp_path: Path) -> None:
    """The keyless messages' state is the empty key; Kafka keys may be far longer than
    LMDB's 511 bytes."""
    file = open_file(backend, tmp_path / file_name(backend, 0))
    long, longer = b"x" * 2_000, b"x" * 1_999 + b"y"
    file.write([(b"", b"keyless", 1), (long, b"long", 2), (longer, b"longer", 3)])
    assert file.read(b"") == (b"keyless", 1)
    assert file.read(long) == (b"long", 2)
    assert file.read(longer) == (b"longer", 3)
    assert file.count() == 3
    file.close()


def test_lmdb_files_are_named_apart_from_sqlite_ones() -> None:
    assert file_name(StateBackend.LMDB, 0) == "0.lmdb"
    assert file_name(StateBackend.SQLITE, 0) == "0.sqlite"


@pytest.mark.parametrize("backend", BACKENDS, ids=[b.value for b in BACKENDS])
def test_a_write_that_fails_leaves_the_file_as_it_was(
    backend: StateBackend, tmp_path: Path
) -> None:
    file = open_file(backend, tmp_path / file_name(backend, 0))
    file.write([(b"a", b"1", 1)], {"checkpoint": "1"})

    def rows() -> Iterator[tuple[bytes, bytes | None, int]]:
        yield (b"a", b"2", 2)
        raise OSError(28, "No space left on device")

    with pytest.raises(OSError):
        file.write(rows(), {"checkpoint": "2"})
    assert file.read(b"a") == (b"1", 1)
    assert file.meta() == {"checkpoint": "1"}
    file.write([(b"b", b"3", 3)])  # the file is usable again
    assert file.count() == 2
    file.close()
