"""PartitionTable: one partition's state, a local file with the keys in use in memory.

The file (``<state dir>/<group>/<changelog>/<partition>.sqlite``, or ``.lmdb``: see
:mod:`laneway.state.files.base`) is a *cache of the changelog*: it
only ever holds values the changelog has (acknowledged, or committed with exactly-once),
and its ``checkpoint`` is the changelog offset up to which it reflects the changelog, so a
restore reads only the changelog after it. What handlers change is kept in memory (the
*dirty* entries) until the change is in the changelog, then written to the file in bulk
(:meth:`PartitionTable.flush`).

The file also names what it belongs to (group, input topic, changelog topic, partition),
and is locked while a consumer uses it (see :mod:`laneway.state.local_file`): a file made
for something else is not used (restored in full instead, said loudly).

**A file that cannot be used** (its backend reports it damaged, unreadable or not a state
file, or one of its checks fails: see :mod:`laneway.state.files.checks`) is set aside,
renamed with the time (never deleted), with a WARNING naming it and why, and a new file
takes its place (see :class:`~laneway.state.local_file.LocalFile`). Found while the
partition is restored, the restore starts again in full (:class:`FileReplaced`). Found
while handlers use the table (a read, a checkpoint), the table *recovers*: ``on_replaced``
is told, so that the partition is restored in full into the new file while its handlers go
on from memory; a read of a key not in memory waits until that restore is done, and no
checkpoint is taken meanwhile.
"""

from __future__ import annotations

import contextlib
import itertools
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path

from laneway.errors import LanewayError
from laneway.state.files.base import StateBackend
from laneway.state.files.checks import UnusableFile
from laneway.state.local_file import LocalFile
from laneway.state.records import Entry, Row

_ABSENT: Entry = (None, -1)
"""What a read caches for a key the partition has no state for."""


class StateUnavailable(LanewayError):
    """A message's partition has no state here (it was given up while the message ran)."""


class FileReplaced(LanewayError):
    """The table's file could not be used and was replaced while it was being restored:
    the restore starts again, in full."""


class PartitionTable:
    """The state of one input partition (see the module docs).

    Handler threads call :meth:`get` and :meth:`put`; the control thread :meth:`flush`;
    the restorer :meth:`load` and :meth:`restored`. Tuning: ``cached_keys`` bounds the keys
    kept in memory (clean ones are dropped past it and read from the file again: a read
    from the file costs a few microseconds, a read from memory a tenth of one);
    ``backend`` keeps the file (:class:`~laneway.state.files.base.StateBackend`);
    ``on_replaced`` is called (from the thread that found it, the table's lock held) when
    the file of a table in use had to be replaced.
    """

    def __init__(
        self,
        path: Path | None,
        identity: Mapping[str, str],
        cached_keys: int,
        backend: StateBackend = StateBackend.SQLITE,
        on_replaced: Callable[[PartitionTable], None] | None = None,
    ) -> None:
        self._cached_keys = cached_keys
        self._lock = threading.Lock()
        self.cached: dict[bytes, Entry] = {}
        """The keys in memory (read it first: :meth:`get` when a key is not there)."""
        self._dirty: dict[bytes, Entry] = {}
        self.unlogged: dict[bytes, Entry] = {}
        """Changes kept by :meth:`keep` and not yet taken to the changelog."""
        self.evictions = 0
        """How many times the clean keys were dropped from memory (``cached_keys``)."""
        self._on_replaced = on_replaced
        self._in_use = False
        """Restored once: handlers read it (a replaced file then means a recovery)."""
        self._readable = threading.Event()
        """Clear while the table recovers: reads of keys not in memory wait for it."""
        self._readable.set()
        self._closed = False
        self._wanted = (path, identity, backend)
        self._opened: LocalFile | None = None

    @property
    def _local(self) -> LocalFile:
        """The file, opened on first use: by the restorer, on its own thread (not in the
        rebalance callback that made the table)."""
        local = self._opened
        if local is None:
            local = self._opened = LocalFile(*self._wanted)
        return local

    @property
    def path(self) -> Path | None:
        """Where the file is (``None``: in memory)."""
        return self._wanted[0] if self._opened is None else self._opened.path

    @property
    def why_full(self) -> str | None:
        """Why the file cannot be used as it is (a full restore follows), ``None`` if it can."""
        return self._local.why_full

    @property
    def generation(self) -> int:
        """How many times the file was replaced (a restore begun before must start again)."""
        return self._local.generation

    def _replace(self, error: UnusableFile) -> None:
        """The file failed (the lock held): a new one in its place; a table in use
        recovers (see the module docs)."""
        self._local.replace(error)
        if self._in_use:
            self._readable.clear()
            if self._on_replaced is not None:
                self._on_replaced(self)

    @contextlib.contextmanager
    def _restoring(self) -> Iterator[None]:
        """For the restorer's calls (the lock held): a file that fails is replaced, and
        the restore told to start again."""
        if self._closed:
            raise StateUnavailable(f"state file {self.path} is closed")
        try:
            yield
        except UnusableFile as error:
            self._replace(error)
            raise FileReplaced(str(error)) from error

    # -- the handlers' side -------------------------------------------------------------

    def get(self, key: bytes) -> Entry:
        """``key``'s state: its serialized value (``None``: none) and the input offset that
        last changed it (-1: never). Waits while the table recovers."""
        entry = self.cached.get(key)
        if entry is not None:
            return entry
        while True:
            self._readable.wait()
            with self._lock:
                if self._closed:
                    raise StateUnavailable(f"the state of {self.path} was given up")
                if not self._readable.is_set():
                    continue
                try:
                    entry = self._local.file.read(key) or _ABSENT
                except UnusableFile as error:
                    self._replace(error)
                    continue
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

    # -- the restorer's side --------------------------------------------------------------

    @property
    def checkpoint(self) -> int:
        """The changelog offset the file reflects the changelog up to (0: nothing yet)."""
        with self._lock, self._restoring():
            checkpoint = self._local.file.meta().get("checkpoint")
        return 0 if checkpoint is None or self.why_full else int(checkpoint)

    @property
    def held(self) -> int:
        """The changelog offset the changelog reached at least, as far as the file knows:
        its checkpoint, plus the entries written into it since without a checkpoint (each
        was acknowledged by the changelog after the checkpoint, so each is a record past
        it). A changelog ending before it lost what the file holds."""
        with self._lock, self._restoring():
            meta = self._local.file.meta()
        checkpoint = 0 if self.why_full else int(meta.get("checkpoint", "0"))
        return max(checkpoint, int(meta.get("held", "0")))

    @property
    def checkpoint_age(self) -> float:
        """Seconds since the checkpoint was taken (0 without one)."""
        with self._lock, self._restoring():
            taken = self._local.file.meta().get("checkpoint_time")
        try:
            return 0.0 if taken is None else max(0.0, time.time() - float(taken))
        except ValueError:
            return float("inf")

    @property
    def rebuilding(self) -> bool:
        """Whether a rebuild of the changelog from this file was begun and not finished
        (see :mod:`laneway.state.restore`)."""
        with self._lock, self._restoring():
            return self._local.file.meta().get("rebuilding") == "1"

    def mark_rebuilding(self) -> None:
        """Note in the file that the changelog is being rebuilt from it."""
        with self._lock, self._restoring():
            self._local.file.write((), {"rebuilding": "1"})

    def verify(self) -> None:
        """Read the whole file and check it (see :mod:`laneway.state.files.checks`)."""
        with self._lock, self._restoring():
            self._local.file.verify()

    def clear(self, why: str) -> None:
        """Forget the file's content (a full restore follows); what handlers changed in
        memory stays."""
        with self._lock, self._restoring():
            self._local.file.clear()
            self._local.why_full = why

    def set_aside(self, why: str) -> None:
        """Set the file aside although it can be used (it is kept as it is), a new one in
        its place."""
        with self._lock, self._restoring():
            self._local.replace(UnusableFile(why))

    def load(self, entries: Iterable[Row]) -> None:
        """Write changelog records ``(key, value, offset)`` into the file (restore), the
        highest offset per key winning."""
        with self._lock, self._restoring():
            self._local.file.write(entries)

    def rows(self, batch: int) -> Iterator[list[Row]]:
        """Every row of the file, checked, ``batch`` at a time."""
        with self._lock, self._restoring():
            rows = self._local.file.rows()
        while True:
            with self._lock, self._restoring():
                taken = list(itertools.islice(rows, batch))
            if not taken:
                return
            yield taken

    def restored(self, checkpoint: int, generation: int) -> None:
        """The restore begun at ``generation`` is done: the file reflects the changelog up
        to ``checkpoint`` (:class:`FileReplaced` when the file was replaced meanwhile);
        reads no longer wait."""
        with self._lock, self._restoring():
            if generation != self.generation:
                raise FileReplaced("the file was replaced while it was restored")
            self._local.file.write((), self._local.checkpoint_meta(checkpoint))
            self._local.why_full = None
            self._in_use = True
            self._readable.set()

    def keys(self) -> int:
        """How many keys have state in the file."""
        with self._lock, self._restoring():
            return self._local.file.count()

    # -- the control thread's side --------------------------------------------------------

    def flush(self, entries: Iterable[Row], checkpoint: int | None) -> None:
        """Write entries now in the changelog into the file, with the ``checkpoint`` they
        bring it up to, in one transaction; entries not changed since are no longer
        dirty. A file that fails is replaced (see the module docs) and the entries stay
        dirty. With ``checkpoint=None`` (the changelog's end unknown) the checkpoint stays,
        and the file notes that the changelog holds at least as many records past it as
        entries were written (see :attr:`held`); while the table recovers, neither."""
        written = list(entries)
        with self._lock:
            if self._closed:
                raise StateUnavailable(f"state file {self.path} is closed")
            recovering = not self._readable.is_set() or self.why_full is not None
            meta = None
            if checkpoint is not None and not recovering:
                meta = self._local.checkpoint_meta(checkpoint)
            elif written and not recovering:
                known = self._local.file.meta()
                held = max(int(known.get("checkpoint", "0")), int(known.get("held", "0")))
                meta = {"held": str(held + len(written))}
            try:
                self._local.file.write(written, meta)
            except UnusableFile as error:
                self._replace(error)
                return
            dirty = self._dirty
            for key, _value, offset in written:
                kept = dirty.get(key)
                if kept is not None and kept[1] <= offset:
                    del dirty[key]

    def close(self) -> None:
        """Close the file and release its lock (idempotent); reads waiting end."""
        with self._lock:
            self._closed = True
            if self._opened is not None:
                self._opened.close()
        self._readable.set()
