"""SqliteFile: a partition's state in an SQLite file (the default backend)."""

from __future__ import annotations

import contextlib
import errno
import sqlite3
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path

from laneway.state.files.checks import (
    CHECK_NAME,
    UnusableFile,
    checked_names,
    names_check,
    row_check,
)
from laneway.state.records import Entry, Row

_STATE = (
    "CREATE TABLE IF NOT EXISTS state (key BLOB PRIMARY KEY, value BLOB, "
    "offset INTEGER NOT NULL, checked INTEGER NOT NULL) WITHOUT ROWID"
)
_META = "CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value TEXT NOT NULL)"
_COLUMNS = {"state": ["key", "value", "offset", "checked"], "meta": ["name", "value"]}
"""The tables of a state file and their columns; a file with others is not one."""
_FIRST_FORMAT = ["key", "value", "offset"]
"""The state table's columns in format 1 (no row checks): such a file is cleared anew."""
_UPSERT = (
    "INSERT INTO state (key, value, offset, checked) VALUES (?, ?, ?, ?) ON CONFLICT (key) "
    "DO UPDATE SET value = excluded.value, offset = excluded.offset, checked = excluded.checked "
    "WHERE excluded.offset >= state.offset"
)
_ROWS = "SELECT key, value, offset, checked FROM state ORDER BY key"
_SQLITE_FULL = 13
"""SQLite's result code for a write that found the disk full."""


class SqliteFile:
    """A :class:`~laneway.state.files.base.StateFile` in SQLite (WAL, ``synchronous=NORMAL``:
    a process crash loses nothing written; ``path=None``: in memory). Each row carries its
    check (:func:`~laneway.state.files.checks.row_check`); :meth:`verify` adds SQLite's
    ``quick_check`` of the pages to reading every row, through a connection of its own (so
    that it reads what is on disk, not the pages this one holds in memory)."""

    def __init__(self, path: Path | None) -> None:
        self._path = path
        self._where = "a state file in memory" if path is None else f"state file {path}"
        try:
            self._db = sqlite3.connect(
                ":memory:" if path is None else str(path),
                check_same_thread=False,
                isolation_level=None,
            )
        except sqlite3.Error as error:
            raise self._unusable(error) from error
        try:
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._first_format = self._tables() == _FIRST_FORMAT
            if not self._first_format:
                self._db.execute(_STATE)
            self._db.execute(_META)
        except sqlite3.Error as error:
            self.close()
            raise self._unusable(error) from error
        except UnusableFile:
            self.close()
            raise

    def _tables(self) -> list[str] | None:
        """The state table's columns (``None``: a new file); an UnusableFile for a
        database that is not a state file."""
        names = [
            name
            for (name,) in self._db.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"
            )
        ]
        state = None
        for name in names:
            found = self._db.execute("SELECT name FROM pragma_table_info(?) ORDER BY cid", (name,))
            columns = [column for (column,) in found]
            if name == "state" and columns == _FIRST_FORMAT:
                state = columns
            elif _COLUMNS.get(name) != columns:
                raise UnusableFile(f"it is not a laneway state file (it has table {name!r})")
            elif name == "state":
                state = columns
        return state

    def read(self, key: bytes) -> Entry | None:
        try:
            row = self._db.execute(
                "SELECT value, offset, checked FROM state WHERE key = ?", (key,)
            ).fetchone()
        except sqlite3.ProgrammingError:
            raise  # closed: not the file's fault
        except sqlite3.Error as error:
            raise self._unusable(error) from error
        if row is None:
            return None
        if not _sound(key, *row):
            raise UnusableFile("a row fails its check (damaged)")
        return row[0], row[1]

    def write(self, rows: Iterable[Row], meta: Mapping[str, str] | None = None) -> None:
        db = self._db
        with self._reporting():
            db.execute("BEGIN")
            try:
                db.executemany(_UPSERT, ((k, v, o, row_check(k, v, o)) for k, v, o in rows))
                if meta:
                    names = {**self._names(), **meta}
                    names[CHECK_NAME] = names_check(names)
                    db.executemany("INSERT OR REPLACE INTO meta VALUES (?, ?)", names.items())
            except BaseException:
                db.execute("ROLLBACK")
                raise
            db.execute("COMMIT")

    def meta(self) -> dict[str, str]:
        with self._reporting():
            return self._names()

    def _names(self) -> dict[str, str]:
        return checked_names(dict(self._db.execute("SELECT name, value FROM meta")))

    def rows(self) -> Iterator[Row]:
        return self._rows(self._db)

    def _rows(self, db: sqlite3.Connection) -> Iterator[Row]:
        with self._reporting():
            for key, value, offset, checked in db.execute(_ROWS):
                if not _sound(key, value, offset, checked):
                    raise UnusableFile("a row fails its check (damaged)")
                yield key, value, offset

    def verify(self) -> None:
        if self._path is None:
            return  # in memory: nothing can damage it
        with self._reporting():
            uri = f"{Path(self._path).resolve().as_uri()}?mode=ro"
            reader = sqlite3.connect(uri, uri=True, check_same_thread=False)
        try:
            with self._reporting():
                found = reader.execute("PRAGMA quick_check").fetchall()
                if found != [("ok",)]:
                    raise UnusableFile(f"SQLite's quick_check found {found[0][0]!r}")
            last = None
            for key, _value, _offset in self._rows(reader):
                if last is not None and key <= last:
                    raise UnusableFile("its rows are out of order (damaged)")
                last = key
        finally:
            reader.close()

    def clear(self) -> None:
        with self._reporting():
            self._db.execute("DROP TABLE IF EXISTS state")
            self._db.execute("DELETE FROM meta")
            self._db.execute(_STATE)
        self._first_format = False

    def count(self) -> int:
        with self._reporting():
            return int(self._db.execute("SELECT count(*) FROM state").fetchone()[0])

    def close(self) -> None:
        with contextlib.suppress(sqlite3.Error):
            self._db.close()

    @contextlib.contextmanager
    def _reporting(self) -> Iterator[None]:
        """SQLite's errors as :class:`UnusableFile`; but a full disk is an OSError (the
        file is as it was, it only cannot grow) and a closed file's are not the file's."""
        try:
            yield
        except sqlite3.ProgrammingError:
            raise
        except sqlite3.Error as error:
            if getattr(error, "sqlite_errorcode", None) == _SQLITE_FULL:
                raise OSError(errno.ENOSPC, f"{self._where}: {error}") from error
            raise self._unusable(error) from error

    def _unusable(self, error: sqlite3.Error) -> UnusableFile:
        return UnusableFile(f"{type(error).__name__}: {error}")


def _sound(key: object, value: object, offset: object, checked: object) -> bool:
    """Whether a row read back is one this backend wrote: its types (damage can turn a
    BLOB into TEXT) and its check."""
    return (
        type(key) is bytes
        and (value is None or type(value) is bytes)
        and type(offset) is int
        and checked == row_check(key, value, offset)
    )
