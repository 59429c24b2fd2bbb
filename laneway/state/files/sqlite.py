"""SqliteFile: a partition's state in an SQLite file (the default backend)."""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Iterable, Mapping
from pathlib import Path

from laneway.state.records import Entry, Row

_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS state "
    "(key BLOB PRIMARY KEY, value BLOB, offset INTEGER NOT NULL) WITHOUT ROWID",
    "CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value TEXT NOT NULL)",
)
_UPSERT = (
    "INSERT INTO state (key, value, offset) VALUES (?, ?, ?) ON CONFLICT (key) DO UPDATE SET "
    "value = excluded.value, offset = excluded.offset WHERE excluded.offset >= state.offset"
)


class SqliteFile:
    """A :class:`~laneway.state.files.base.StateFile` in SQLite (WAL, ``synchronous=NORMAL``:
    a process crash loses nothing written; ``path=None``: in memory)."""

    def __init__(self, path: Path | None) -> None:
        self._db = sqlite3.connect(
            ":memory:" if path is None else str(path), check_same_thread=False, isolation_level=None
        )
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        for statement in _SCHEMA:
            self._db.execute(statement)

    def read(self, key: bytes) -> Entry | None:
        row = self._db.execute("SELECT value, offset FROM state WHERE key = ?", (key,)).fetchone()
        return None if row is None else (row[0], row[1])

    def write(self, rows: Iterable[Row], meta: Mapping[str, str] | None = None) -> None:
        db = self._db
        db.execute("BEGIN")
        try:
            db.executemany(_UPSERT, rows)
            if meta:
                db.executemany("INSERT OR REPLACE INTO meta VALUES (?, ?)", meta.items())
        except BaseException:
            db.execute("ROLLBACK")
            raise
        db.execute("COMMIT")

    def meta(self) -> dict[str, str]:
        return dict(self._db.execute("SELECT name, value FROM meta").fetchall())

    def clear(self) -> None:
        self._db.execute("DELETE FROM state")
        self._db.execute("DELETE FROM meta")

    def count(self) -> int:
        return int(self._db.execute("SELECT count(*) FROM state").fetchone()[0])

    def close(self) -> None:
        with contextlib.suppress(sqlite3.Error):
            self._db.close()
