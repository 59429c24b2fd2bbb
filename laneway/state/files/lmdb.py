"""LmdbFile: a partition's state in an LMDB file (``pip install laneway[lmdb]``)."""

from __future__ import annotations

import hashlib
import struct
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from laneway.errors import ConfigError
from laneway.state.records import Entry, Row

MAP_SIZE = 1 << 40
"""The largest a file may grow (address space reserved, not disk: LMDB maps the file)."""
_OFFSET = struct.Struct(">q")
_DELETED = b"\x00"
_VALUE = b"\x01"


LONGEST_KEY = 500
"""Longer keys are stored under their SHA-256 (LMDB refuses keys over 511 bytes)."""


def _key(key: bytes) -> bytes:
    """Where ``key``'s row is: a prefix byte (LMDB refuses the empty key, the keyless
    messages' state) and the key, or its SHA-256 when it is long."""
    if len(key) <= LONGEST_KEY:
        return b"k" + key
    return b"h" + hashlib.sha256(key).digest()


def _pack(value: bytes | None, offset: int) -> bytes:
    return _OFFSET.pack(offset) + (_DELETED if value is None else _VALUE + value)


def _unpack(packed: bytes) -> Entry:
    offset = _OFFSET.unpack_from(packed)[0]
    return (None if packed[8:9] == _DELETED else bytes(packed[9:])), offset


class LmdbFile:
    """A :class:`~laneway.state.files.base.StateFile` in LMDB: one file (and its
    ``-lock`` file) per partition, rows and meta in two named databases. Commits are not
    flushed to disk at once (``sync=False``): a process crash loses nothing, a machine
    crash may lose the last ones, as with the SQLite backend's ``synchronous=NORMAL``."""

    def __init__(self, path: Path) -> None:
        try:
            import lmdb
        except ImportError as exc:
            raise ConfigError(
                "StateStore backend='lmdb' needs the lmdb package: pip install laneway[lmdb]"
            ) from exc
        self._env: Any = lmdb.open(
            str(path), subdir=False, map_size=MAP_SIZE, max_dbs=2, sync=False, metasync=False
        )
        self._rows = self._env.open_db(b"state")
        self._meta = self._env.open_db(b"meta")
        self._closed = False

    def read(self, key: bytes) -> Entry | None:
        with self._env.begin(db=self._rows) as txn:
            packed = txn.get(_key(key))
        return None if packed is None else _unpack(packed)

    def write(self, rows: Iterable[Row], meta: Mapping[str, str] | None = None) -> None:
        with self._env.begin(write=True, db=self._rows) as txn:
            get, put = txn.get, txn.put
            for key, value, offset in rows:
                where = _key(key)
                known = get(where)
                if known is None or _OFFSET.unpack_from(known)[0] <= offset:
                    put(where, _pack(value, offset))
            for name, text in (meta or {}).items():
                txn.put(name.encode(), text.encode(), db=self._meta)

    def meta(self) -> dict[str, str]:
        with self._env.begin(db=self._meta) as txn:
            return {bytes(name).decode(): bytes(text).decode() for name, text in txn.cursor()}

    def clear(self) -> None:
        with self._env.begin(write=True) as txn:
            txn.drop(self._rows, delete=False)
            txn.drop(self._meta, delete=False)

    def count(self) -> int:
        with self._env.begin() as txn:
            return int(txn.stat(self._rows)["entries"])

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._env.sync(True)
            self._env.close()
