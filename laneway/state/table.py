"""PartitionTable: one partition's state, a local file with the keys in use in memory.

The file (``<state dir>/<group>/<changelog>/<partition>.sqlite``, or ``.lmdb``: see
:mod:`laneway.state.files.base`) is a *cache of the changelog*: it
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

import fcntl
import os
import threading
import time
from collections.abc import Iterable, Mapping
from pathlib import Path

from laneway.logs import get_logger
from laneway.state.files.base import StateBackend, StateFile, open_file
from laneway.state.records import Entry

log = get_logger(__name__)

FORMAT = "1"
"""The file format; a file of another format is restored anew."""
_ABSENT: Entry = (None, -1)
"""What a read caches for a key the partition has no state for."""


class PartitionTable:
    """The state of one input partition (see the module docs).

    Handler threads call :meth:`get` and :meth:`put`; the control thread :meth:`flush`;
    the restorer :meth:`load`. Tuning: ``cached_keys`` bounds the keys kept in memory
    (clean ones are dropped past it and read from the file again: a read from the file
    costs a few microseconds, a read from memory a tenth of one); ``backend`` keeps the
    file (:class:`~laneway.state.files.base.StateBackend`).
    """

    def __init__(
        self,
        path: Path | None,
        identity: Mapping[str, str],
        cached_keys: int,
        backend: StateBackend = StateBackend.SQLITE,
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
        self._file = self._open(path, backend)

    def _open(self, path: Path | None, backend: StateBackend) -> StateFile:
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
        try:
            file = open_file(backend, path)
        except BaseException:
            self._unlock()
            raise
        if path is not None and self.why_full is None:
            self.why_full = self._check(file)
        return file

    def _check(self, file: StateFile) -> str | None:
        meta = file.meta()
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
            entry = self._file.read(key) or _ABSENT
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
            self.keep_here(key, entry)

    def keep_here(self, key: bytes, entry: Entry) -> None:
        """:meth:`keep` without the lock, for a handler on the thread that takes the
        unlogged changes (the sync engine's: nothing else changes the table meanwhile)."""
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
        with self._lock:
            checkpoint = self._file.meta().get("checkpoint")
        return 0 if checkpoint is None or self.why_full else int(checkpoint)

    @property
    def checkpoint_age(self) -> float:
        """Seconds since the checkpoint was taken (0 without one)."""
        with self._lock:
            taken = self._file.meta().get("checkpoint_time")
        return 0.0 if taken is None else max(0.0, time.time() - float(taken))

    def clear(self, why: str) -> None:
        """Forget the file's content (a full restore follows)."""
        with self._lock:
            self._file.clear()
            self.cached.clear()
            self._dirty.clear()
            self.unlogged.clear()
        self.why_full = why

    def load(self, entries: Iterable[tuple[bytes, bytes | None, int]]) -> None:
        """Write changelog records ``(key, value, offset)`` into the file (restore), the
        highest offset per key winning."""
        with self._lock:
            self._file.write(entries)

    def flush(
        self, entries: Iterable[tuple[bytes, bytes | None, int]], checkpoint: int | None
    ) -> None:
        """Write entries now in the changelog into the file, with the ``checkpoint`` they
        bring it up to (``None``: keep the checkpoint), in one SQLite transaction; entries
        not changed since are no longer dirty."""
        written = list(entries)
        meta = None
        if checkpoint is not None:
            meta = {**self._identity, "checkpoint": str(checkpoint),
                    "checkpoint_time": repr(time.time())}  # fmt: skip
        with self._lock:
            self._file.write(written, meta)
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
            return self._file.count()

    def close(self) -> None:
        """Close the file and release its lock (idempotent)."""
        with self._lock:
            self._file.close()
            self._unlock()

    def _unlock(self) -> None:
        if self._lock_file is not None:
            os.close(self._lock_file)
            self._lock_file = None
