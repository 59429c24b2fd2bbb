"""A damaged state file is refused, never read wrong, and never ends the reading process.

Each backend's file is damaged on disk the ways ``file_damage`` and a few flipped bits do
it; opening it, reading its names and verifying it (what a restore from its checkpoint
does) must then either raise :class:`UnusableFile` or find every row exactly as written.
The LMDB backend reads a file in a child process first (a damaged LMDB file could end the
process reading it); the last tests check what the checks are made of.
"""

from __future__ import annotations

import random
import shutil
import sqlite3
from pathlib import Path

import pytest
from file_damage import SET_ASIDE, damage

from laneway.state.files.base import StateBackend, file_name, open_file
from laneway.state.files.checks import UnusableFile, row_check

BACKENDS = pytest.mark.parametrize("backend", list(StateBackend), ids=lambda b: b.value)
ROWS = [
    (b"key-%d" % i * (1 if i % 40 else 60), None if i % 11 == 0 else b"%d" % i, i)
    for i in range(3_000)
]
"""Rows of a few pages (some deleted values, some keys long enough to be stored by hash)."""
NAMES = {"checkpoint": "3000", "group": "g"}


@pytest.fixture(scope="module")
def originals(tmp_path_factory: pytest.TempPathFactory) -> dict[StateBackend, Path]:
    made = {}
    for backend in StateBackend:
        path = tmp_path_factory.mktemp(backend.value) / file_name(backend, 0)
        file = open_file(backend, path)
        for start in range(0, len(ROWS), 500):
            file.write(ROWS[start : start + 500], NAMES)
        file.close()
        made[backend] = path
    return made


def outcome(backend: StateBackend, path: Path) -> str:
    """``refused`` (with why), ``intact``, or an AssertionError for a file read wrong."""
    try:
        file = open_file(backend, path)
        try:
            names = file.meta()
            file.verify()
            rows = list(file.rows())
            found = [file.read(key) for key, _, _ in ROWS]
        finally:
            file.close()
    except UnusableFile as error:
        return f"refused: {error}"
    assert names == NAMES, names
    assert sorted(rows) == sorted(ROWS)
    assert found == [(value, offset) for _, value, offset in ROWS]
    return "intact"


def copy(original: Path, tmp_path: Path) -> Path:
    path = tmp_path / original.name
    shutil.copy(original, path)
    return path


@BACKENDS
@pytest.mark.parametrize("kind", sorted(SET_ASIDE - {"permissions"}))
def test_each_kind_of_damage_is_refused(
    backend: StateBackend, kind: str, originals: dict[StateBackend, Path], tmp_path: Path
) -> None:
    path = copy(originals[backend], tmp_path)
    damage(path, kind)
    assert outcome(backend, path).startswith("refused"), kind


@BACKENDS
def test_a_file_without_its_lock_files_is_read_as_it_was(
    backend: StateBackend, originals: dict[StateBackend, Path], tmp_path: Path
) -> None:
    path = copy(originals[backend], tmp_path)
    damage(path, "lock_missing")
    assert outcome(backend, path) == "intact"


@BACKENDS
@pytest.mark.parametrize("seed", range(40))
def test_flipped_bits_and_random_bytes_are_refused_or_harmless(
    backend: StateBackend, seed: int, originals: dict[StateBackend, Path], tmp_path: Path
) -> None:
    """Damage anywhere in the file: refused, or it hit space the file does not use (every
    row then reads back as written)."""
    path = copy(originals[backend], tmp_path)
    rnd = random.Random(seed)
    data = bytearray(path.read_bytes())
    if seed % 2:
        for _ in range(rnd.choice([1, 3])):
            data[rnd.randrange(len(data))] ^= 1 << rnd.randrange(8)
    else:
        start = rnd.randrange(len(data) - 512)
        data[start : start + 512] = rnd.randbytes(512)
    path.write_bytes(bytes(data))
    outcome(backend, path)  # raises when a row reads back wrong


def test_the_row_check_covers_every_bit_of_the_offset() -> None:
    base = row_check(b"k", b"v", 3_925)
    for bit in range(63):
        assert row_check(b"k", b"v", 3_925 ^ (1 << bit)) != base, bit
    assert row_check(b"k", None, 1) != row_check(b"k", b"", 1)
    assert row_check(b"ab", b"c", 1) != row_check(b"a", b"bc", 1)


def test_a_file_of_the_first_format_is_cleared_anew(tmp_path: Path) -> None:
    """Files written before rows carried checks are not damaged: their names say format 1,
    so the table restores them in full (clearing makes the new table)."""
    path = tmp_path / "0.sqlite"
    db = sqlite3.connect(path)
    db.execute(
        "CREATE TABLE state (key BLOB PRIMARY KEY, value BLOB, offset INTEGER NOT NULL) "
        "WITHOUT ROWID"
    )
    db.execute("CREATE TABLE meta (name TEXT PRIMARY KEY, value TEXT NOT NULL)")
    db.execute("INSERT INTO meta VALUES ('format', '1'), ('checkpoint', '7')")
    db.execute("INSERT INTO state VALUES (x'61', x'31', 3)")
    db.commit()
    db.close()
    file = open_file(StateBackend.SQLITE, path)
    assert file.meta() == {"format": "1", "checkpoint": "7"}
    file.clear()
    file.write([(b"a", b"2", 4)], {"format": "2"})
    assert file.read(b"a") == (b"2", 4)
    file.close()
