"""StateFile: what a partition's local state file does, whichever backend keeps it.

A file holds each key's entry (serialized value, or ``None`` for a deleted one, and the
input offset that last changed it) and a few named strings (*meta*: what the file belongs
to, its checkpoint). :class:`~laneway.state.table.PartitionTable` serializes every call
(one at a time, under its lock) and keeps the keys in use in memory in front of it.

Backends (:class:`StateBackend`): ``sqlite`` (:mod:`.sqlite`, the standard library's,
the default) and ``lmdb`` (:mod:`.lmdb`, the ``laneway[lmdb]`` extra: restores and
checkpoints about 4x faster, see docs/results/state-backends.md).
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
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
        """The named strings the file holds."""

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


def file_name(backend: StateBackend, partition: int) -> str:
    """The file name of ``partition``'s state with ``backend``."""
    return f"{partition}.{backend.value}"
