"""LmdbFile: a partition's state in an LMDB file (``pip install laneway[lmdb]``)."""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import struct
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from laneway.errors import ConfigError
from laneway.state.files.checks import (
    CHECK_NAME,
    UnusableFile,
    checked_names,
    names_check,
    row_check,
)
from laneway.state.files.lmdb_check import check_apart
from laneway.state.records import Entry, Row

MAP_SIZE = 1 << 40
"""The largest a file may grow (address space reserved, not disk: LMDB maps the file)."""
_HEAD = struct.Struct(">qIB")
"""A packed row's head: the offset, the row's check and its flags."""
_VALUE = 1
"""Flag: a value follows (else the key's value is deleted)."""
_NAMED = 2
"""Flag: the key itself follows, as 4-byte length and bytes (a key stored under its hash)."""
_LENGTH = struct.Struct(">I")
_DATABASES = {b"state", b"meta"}
"""The named databases of a state file; an LMDB file with others is not one."""

_FULL = os.strerror(errno.ENOSPC)
"""How LMDB's error for a full disk reads (a full disk is an OSError: the file is as it
was, it only cannot grow)."""

LONGEST_KEY = 500
"""Longer keys are stored under their SHA-256 (LMDB refuses keys over 511 bytes)."""


def _key(key: bytes) -> bytes:
    """Where ``key``'s row is: a prefix byte (LMDB refuses the empty key, the keyless
    messages' state) and the key, or its SHA-256 when it is long."""
    if len(key) <= LONGEST_KEY:
        return b"k" + key
    return b"h" + hashlib.sha256(key).digest()


def _pack(key: bytes, value: bytes | None, offset: int) -> bytes:
    flags = (0 if value is None else _VALUE) | (_NAMED if len(key) > LONGEST_KEY else 0)
    packed = _HEAD.pack(offset, row_check(key, value, offset), flags)
    if flags & _NAMED:
        packed += _LENGTH.pack(len(key)) + key
    return packed if value is None else packed + value


class LmdbFile:
    """A :class:`~laneway.state.files.base.StateFile` in LMDB: one file (and its
    ``-lock`` file) per partition, rows and meta in two named databases. Commits are not
    flushed to disk at once (``sync=False``): a process crash loses nothing, a machine
    crash may lose the last ones, as with the SQLite backend's ``synchronous=NORMAL``.

    LMDB maps the file into memory and trusts it: a file that is there is first checked in
    a child process (``checked_apart``, see :mod:`.lmdb_check`), and one cut short is
    refused before any of its pages is read, then and before each transaction (reading past
    its end would end the process with SIGBUS; a file cut short *during* a transaction
    still does, and the next start sets it aside). Each row carries its check; :meth:`verify`
    also finds each row again by its key and compares the rows read with LMDB's count."""

    def __init__(self, path: Path, checked_apart: bool = True) -> None:
        try:
            import lmdb
        except ImportError as exc:
            raise ConfigError(
                "StateStore backend='lmdb' needs the lmdb package: pip install laneway[lmdb]"
            ) from exc
        self._errors: type[Exception] = lmdb.Error
        self._where = f"state file {path}"
        self._closed = False
        self._fd = -1
        self._needed = 0
        if checked_apart and path.is_file() and path.stat().st_size > 0:
            check_apart(path)
        with self._reporting(opening=True):
            self._env: Any = lmdb.open(
                str(path), subdir=False, map_size=MAP_SIZE, max_dbs=2, sync=False, metasync=False
            )
        try:
            with self._reporting(opening=True):
                self._fd = os.open(path, os.O_RDONLY)
                self._measure()
                self._check_databases()
                self._rows = self._env.open_db(b"state")
                self._meta = self._env.open_db(b"meta")
        except UnusableFile:
            self.close()
            raise

    def _measure(self) -> None:
        """Note how long the file must be (LMDB reads both headers with ``pread`` when it
        opens a file, so these figures are safe to ask for), and refuse it if it is not."""
        self._needed = (self._env.info()["last_pgno"] + 1) * self._env.stat()["psize"]
        self._check_length()

    def _check_length(self) -> None:
        """Refuse a file shorter than its pages (one ``fstat``, before each transaction)."""
        size = os.fstat(self._fd).st_size
        if size < self._needed:
            raise UnusableFile(f"{size} bytes, but its pages need {self._needed} (cut short)")

    def _check_databases(self) -> None:
        with self._env.begin() as txn:
            for name, _ in txn.cursor():
                if bytes(name) not in _DATABASES:
                    raise UnusableFile("it is not a laneway state file")

    def read(self, key: bytes) -> Entry | None:
        self._check_length()
        try:
            with self._env.begin(db=self._rows) as txn:
                packed = txn.get(_key(key))
        except self._errors as error:
            raise self._unusable(error) from error
        return None if packed is None else self._unpacked(key, packed)[1:]

    def _unpacked(self, stored: bytes, packed: bytes) -> tuple[bytes, bytes | None, int]:
        """The row (key, value, offset) packed under ``stored`` (a key, or where its row
        is), once it passes its check."""
        try:
            offset, check, flags = _HEAD.unpack_from(packed)
            start = _HEAD.size
            if flags & _NAMED:
                length = _LENGTH.unpack_from(packed, start)[0]
                start += _LENGTH.size
                key = bytes(packed[start : start + length])
                start += length
            else:
                key = stored
            value = bytes(packed[start:]) if flags & _VALUE else None
        except struct.error:
            check, key, value, offset = -1, stored, None, 0
        if check != row_check(key, value, offset):
            raise UnusableFile("a row fails its check (damaged)")
        return key, value, offset

    def write(self, rows: Iterable[Row], meta: Mapping[str, str] | None = None) -> None:
        self._check_length()
        with self._reporting():
            self._write(rows, meta)
            self._measure()

    def _write(self, rows: Iterable[Row], meta: Mapping[str, str] | None) -> None:
        with self._env.begin(write=True, db=self._rows) as txn:
            get, put = txn.get, txn.put
            for key, value, offset in rows:
                where = _key(key)
                known = get(where)
                if known is None or _HEAD.unpack_from(known)[0] <= offset:
                    put(where, _pack(key, value, offset))
            if meta:
                names = {**self._names(txn), **meta}
                names[CHECK_NAME] = names_check(names)
                for name, text in names.items():
                    txn.put(name.encode(), text.encode(), db=self._meta)

    def meta(self) -> dict[str, str]:
        self._check_length()
        with self._reporting(), self._env.begin() as txn:
            return self._names(txn)

    def _names(self, txn: Any) -> dict[str, str]:
        found = {
            bytes(name).decode("utf-8", "replace"): bytes(text).decode("utf-8", "replace")
            for name, text in txn.cursor(db=self._meta)
        }
        return checked_names(found)

    def rows(self) -> Iterator[Row]:
        self._check_length()
        with self._reporting(), self._env.begin(db=self._rows) as txn:
            for stored, packed in txn.cursor():
                yield self._unpacked(bytes(stored)[1:], packed)

    def verify(self) -> None:
        self._check_length()
        with self._reporting(), self._env.begin(db=self._rows) as txn:
            counted = int(txn.stat(self._rows)["entries"])
            read, last, get = 0, None, txn.get
            for stored, packed in txn.cursor():
                stored = bytes(stored)
                if last is not None and stored <= last:
                    raise UnusableFile("its rows are out of order (damaged)")
                key, _, _ = self._unpacked(stored[1:], packed)
                if _key(key) != stored or get(stored) != packed:
                    raise UnusableFile("a row is not found under its key (damaged)")
                last = stored
                read += 1
            if read != counted:
                raise UnusableFile(f"{read} rows read, but LMDB counts {counted} (damaged)")

    def clear(self) -> None:
        self._check_length()
        with self._reporting(), self._env.begin(write=True) as txn:
            txn.drop(self._rows, delete=False)
            txn.drop(self._meta, delete=False)

    def count(self) -> int:
        self._check_length()
        with self._reporting(), self._env.begin() as txn:
            return int(txn.stat(self._rows)["entries"])

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            env = getattr(self, "_env", None)
            if env is not None:
                with contextlib.suppress(self._errors, UnusableFile, OSError):
                    self._check_length()  # a file cut short is not synced: that reads it
                    env.sync(True)
                with contextlib.suppress(self._errors):
                    env.close()
            if self._fd >= 0:
                os.close(self._fd)

    @contextlib.contextmanager
    def _reporting(self, opening: bool = False) -> Iterator[None]:
        """LMDB's errors as :class:`UnusableFile` (the system's too while ``opening``)."""
        caught: tuple[type[Exception], ...] = (self._errors,)
        if opening:
            caught += (OSError,)
        try:
            yield
        except caught as error:
            if _FULL in str(error) or type(error).__name__ == "MapFullError":
                raise OSError(errno.ENOSPC, f"{self._where}: {error}") from error
            raise self._unusable(error) from error

    def _unusable(self, error: Exception) -> UnusableFile:
        return UnusableFile(f"{type(error).__name__}: {error}")
