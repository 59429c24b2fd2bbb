"""PartitionTable: one partition's state, an SQLite file with the keys in use in memory.

The file (``<state dir>/<changelog>/<partition>.sqlite``) is a *cache of the changelog*: it
only ever holds values the changelog has (acknowledged, or committed with exactly-once),
and its ``checkpoint`` is the changelog offset up to which it reflects the changelog, so a
restore reads only the changelog after it. What handlers change is kept in memory (the
*dirty* entries) until the change is in the changelog, then written to the file in bulk
(:meth:`PartitionTable.flush`).

The file also names what it belongs to (group, input topic, changelog topic, partition):
a file made for something else is not used (restored in full instead, said loudly). The
file is locked (``flock``) while a consumer uses it: a second consumer on the same
directory (a shared volume, a member not yet gone) restores into memory instead of
waiting for it or sharing it.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import sqlite3
import threading
import time
from collections.abc import Iterable, Mapping
from pathlib import Path

from laneway.logs import get_logger
from laneway.state.records import Entry

log = get_logger(__name__)

FORMAT = "1"
"""The file format; a file of another format is restored anew."""
_ABSENT: Entry = (None, -1)
"""What a read caches for a key the partition has no state for."""

_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS state "
    "(key BLOB PRIMARY KEY, value BLOB, offset INTEGER NOT NULL) WITHOUT ROWID",
    "CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value TEXT NOT NULL)",
)
_UPSERT = (
    "INSERT INTO state (key, value, offset) VALUES (?, ?, ?) ON CONFLICT (key) DO UPDATE SET "
    "value = excluded.value, offset = excluded.offset WHERE excluded.offset >= state.offset"
)


class PartitionTable:
    """The state of one input partition (see the module docs).

    Handler threads call :meth:`get` and :meth:`put`; the control thread :meth:`flush`;
    the restorer :meth:`load`. Tuning: ``cached_keys`` bounds the keys kept in memory
    (clean ones are dropped past it and read from the file again: an SQLite read costs a
    few microseconds, a read from memory a tenth of one).
    """

    def __init__(
        self,
        path: Path | None,
        identity: Mapping[str, str],
        cached_keys: int,
    ) -> None:
        self.path = path
        self._identity = {**identity, "format": FORMAT}
        self._cached_keys = cached_keys
        self._lock = threading.Lock()
        self.cached: dict[bytes, Entry] = {}
        """The keys in memory (read it first: :meth:`get` when a key is not there)."""
        self._dirty: dict[bytes, Entry] = {}
        self.unlogged: dict[bytes, Entry] = {}
        """Changes kept by :meth:`keep` and not yet taken to the changelog."""
        self.evictions = 0
        """How many times the clean keys were dropped from memory (``cached_keys``)."""
        self._lock_file: int | None = None
        self.why_full: str | None = None
        """Why the file cannot be used as it is (a full restore follows), ``None`` if it can."""
        self._db = self._open(path)

    def _open(self, path: Path | None) -> sqlite3.Connection:
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(f"{path}.lock", os.O_RDWR | os.O_CREAT, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                os.close(fd)
                log.warning(
                    "state file %s is in use by another process: restoring this partition "
                    "into memory instead",
                    path,
                )
                self.why_full = "its file is in use by another process"
                path = self.path = None
            else:
                self._lock_file = fd
        db = sqlite3.connect(
            ":memory:" if path is None else str(path), check_same_thread=False, isolation_level=None
        )
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=NORMAL")
        for statement in _SCHEMA:
            db.execute(statement)
        if path is not None and self.why_full is None:
            self.why_full = self._check(db)
        return db

    def _check(self, db: sqlite3.Connection) -> str | None:
        meta = dict(db.execute("SELECT name, value FROM meta").fetchall())
        if not meta:
            return "it has no state file yet"
        for name, wanted in self._identity.items():
            if meta.get(name) != wanted:
                return f"its file is for {name} {meta.get(name)!r}, not {wanted!r}"
        if "checkpoint" not in meta:
            return "its file has no checkpoint"
        return None

    # -- the handlers' side -------------------------------------------------------------

    def get(self, key: bytes) -> Entry:
        """``key``'s state: its serialized value (``None``: none) and the input offset that
        last changed it (-1: never)."""
        entry = self.cached.get(key)
        if entry is not None:
            return entry
        with self._lock:
            row = self._db.execute(
                "SELECT value, offset FROM state WHERE key = ?", (key,)
            ).fetchone()
            entry = _ABSENT if row is None else (row[0], row[1])
            if len(self.cached) >= self._cached_keys + len(self._dirty):
                # Only clean keys are dropped (the dirty ones are not in the file yet), and
                # only once cached_keys more were read: with more dirty keys than
                # cached_keys, dropping at cached_keys would copy them on every read.
                self.cached = dict(self._dirty)
                self.evictions += 1
            self.cached.setdefault(key, entry)
            return self.cached[key]

    def put(self, key: bytes, entry: Entry) -> None:
        """``key``'s new state, kept in memory until :meth:`flush` writes it to the file."""
        with self._lock:
            self.cached[key] = entry
            self._dirty[key] = entry

    def keep(self, key: bytes, entry: Entry) -> None:
        """:meth:`put`, the change also *unlogged*: not in the changelog yet, written there
        before the next commit (see :mod:`laneway.state.writer`)."""
        with self._lock:
            self.cached[key] = entry
            self._dirty[key] = entry
            self.unlogged[key] = entry

    def take_unlogged(self, key: bytes | None = None) -> dict[bytes, Entry]:
        """The unlogged changes (of ``key`` only, when given), no longer unlogged."""
        with self._lock:
            if key is None:
                taken, self.unlogged = self.unlogged, {}
                return taken
            entry = self.unlogged.pop(key, None)
            return {} if entry is None else {key: entry}

    def unlog(self, changes: Mapping[bytes, Entry]) -> None:
        """Changes whose changelog write failed, unlogged again unless a newer one is."""
        with self._lock:
            for key, entry in changes.items():
                kept = self.unlogged.get(key)
                if kept is None or kept[1] < entry[1]:
                    self.unlogged[key] = entry

    # -- the control thread's side --------------------------------------------------------

    @property
    def checkpoint(self) -> int:
        """The changelog offset the file reflects the changelog up to (0: nothing yet)."""
        row = self._db.execute("SELECT value FROM meta WHERE name = 'checkpoint'").fetchone()
        return 0 if row is None or self.why_full else int(row[0])

    @property
    def checkpoint_age(self) -> float:
        """Seconds since the checkpoint was taken (0 without one)."""
        row = self._db.execute("SELECT value FROM meta WHERE name = 'checkpoint_time'").fetchone()
        return 0.0 if row is None else max(0.0, time.time() - float(row[0]))

    def clear(self, why: str) -> None:
        """Forget the file's content (a full restore follows)."""
        with self._lock:
            self._db.execute("DELETE FROM state")
            self._db.execute("DELETE FROM meta")
            self.cached.clear()
            self._dirty.clear()
            self.unlogged.clear()
        self.why_full = why

    def load(self, entries: Iterable[tuple[bytes, bytes | None, int]]) -> None:
        """Write changelog records ``(key, value, offset)`` into the file (restore), the
        highest offset per key winning."""
        with self._lock:
            self._db.execute("BEGIN")
            self._db.executemany(_UPSERT, entries)
            self._db.execute("COMMIT")

    def flush(
        self, entries: Iterable[tuple[bytes, bytes | None, int]], checkpoint: int | None
    ) -> None:
        """Write entries now in the changelog into the file, with the ``checkpoint`` they
        bring it up to (``None``: keep the checkpoint), in one SQLite transaction; entries
        not changed since are no longer dirty."""
        written = list(entries)
        with self._lock:
            db = self._db
            db.execute("BEGIN")
            db.executemany(_UPSERT, written)
            if checkpoint is not None:
                meta = {**self._identity, "checkpoint": str(checkpoint),
                        "checkpoint_time": repr(time.time())}  # fmt: skip
                db.executemany("INSERT OR REPLACE INTO meta VALUES (?, ?)", meta.items())
            db.execute("COMMIT")
            dirty = self._dirty
            for key, _value, offset in written:
                kept = dirty.get(key)
                if kept is not None and kept[1] <= offset:
                    del dirty[key]
        if checkpoint is not None:
            self.why_full = None

    def keys(self) -> int:
        """How many keys have state in the file."""
        with self._lock:
            return int(self._db.execute("SELECT count(*) FROM state").fetchone()[0])

    def close(self) -> None:
        """Close the file and release its lock (idempotent)."""
        with self._lock:
            with contextlib.suppress(sqlite3.Error):
                self._db.close()
            if self._lock_file is not None:
                os.close(self._lock_file)
                self._lock_file = None
