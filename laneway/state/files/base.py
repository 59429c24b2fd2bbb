"""StateFile: what a partition's local state file does, whichever backend keeps it.

A file holds each key's entry (serialized value, or ``None`` for a deleted one, and the
input offset that last changed it) and a few named strings (*meta*: what the file belongs
to, its checkpoint). :class:`~laneway.state.table.PartitionTable` serializes every call
(one at a time, under its lock) and keeps the keys in use in memory in front of it.

Every method raises :class:`~laneway.state.files.checks.UnusableFile` for a file that
cannot be used (its library's error, or a failed check: see :mod:`.checks`), never the
library's own errors; the table then sets the file aside.

Backends (:class:`StateBackend`): ``sqlite`` (:mod:`.sqlite`, the standard library's,
the default) and ``lmdb`` (:mod:`.lmdb`, the ``laneway[lmdb]`` extra: restores and
checkpoints about 4x faster, see docs/results/state-backends.md).
"""

from __future__ import annotations

import contextlib
import enum
import os
import time
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Protocol

from laneway.state.records import Entry, Row


class StateBackend(str, enum.Enum):
    """What keeps a state store's local files.

    ``sqlite`` (the default): one SQLite file per partition, from the standard library.
    ``lmdb``: one LMDB file per partition (``pip install laneway[lmdb]``); about 4x faster
    restores, checkpoints and reads of keys not in memory, for large state. Handlers never
    wait on either: the keys in use are read from memory (``cached_keys``).
    """

    SQLITE = "sqlite"
    LMDB = "lmdb"


class StateFile(Protocol):
    """A partition's state file (see the module docs)."""

    def read(self, key: bytes) -> Entry | None:
        """``key``'s entry, ``None`` when the file has none."""

    def write(self, rows: Iterable[Row], meta: Mapping[str, str] | None = None) -> None:
        """Write ``rows`` (a key's row with a lower offset than the file's is skipped) and
        ``meta`` (added to or replacing what is there) in one transaction."""

    def meta(self) -> dict[str, str]:
        """The named strings the file holds (checked)."""

    def rows(self) -> Iterator[Row]:
        """Every row, in key order, each checked."""

    def verify(self) -> None:
        """Read the whole file once and check it (see :mod:`.checks`): an
        :class:`~laneway.state.files.checks.UnusableFile` when it cannot be trusted."""

    def clear(self) -> None:
        """Forget every row and every named string."""

    def count(self) -> int:
        """How many keys the file holds."""

    def close(self) -> None:
        """Close the file (idempotent)."""


def open_file(backend: StateBackend, path: Path | None) -> StateFile:
    """``backend``'s file at ``path`` (``None``: in memory, for a store without a
    directory or a file in use by another process)."""
    if backend is StateBackend.LMDB and path is not None:
        from laneway.state.files.lmdb import LmdbFile

        return LmdbFile(path)
    from laneway.state.files.sqlite import SqliteFile

    return SqliteFile(path)


SIDECARS = {StateBackend.SQLITE: ("-wal", "-shm", "-journal"), StateBackend.LMDB: ("-lock",)}
"""What each backend keeps beside a file, by suffix (its write-ahead log, its locks): set
aside with it."""


def set_aside(path: Path, backend: StateBackend) -> Path:
    """Move the file at ``path`` and what its backend keeps beside it out of the way,
    renamed ``<name>.set-aside-<UTC time>`` in the same directory (never deleted: it may
    hold what an operator wants to look at); return its new path. An OSError when it
    cannot be moved."""
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    aside = path.with_name(f"{path.name}.set-aside-{stamp}")
    again = 1
    while aside.exists():
        again += 1
        aside = path.with_name(f"{path.name}.set-aside-{stamp}-{again}")
    os.rename(path, aside)
    for suffix in SIDECARS[backend]:
        with contextlib.suppress(FileNotFoundError):
            os.rename(f"{path}{suffix}", f"{aside}{suffix}")
    return aside


def file_name(backend: StateBackend, partition: int) -> str:
    """The file name of ``partition``'s state with ``backend``."""
    return f"{partition}.{backend.value}"
