"""Checks that tell a state file's own rows and names from damaged ones.

SQLite and LMDB keep no checksums of what they store, so a file damaged on disk (random
bytes in a page, a copy cut short) can read back wrong values, or lose rows, without an
error. Each row therefore carries :func:`row_check` (a CRC-32 over its key, value and
offset), verified whenever the row is read; the named strings carry one check over all of
them (:func:`names_check`); and a full verification (each backend's ``verify``) reads every
row in key order once, before a restore trusts the file's checkpoint: a row that fails its
check, keys out of order, or fewer rows than the backend counted mean the file cannot be
used (:class:`UnusableFile`).
"""

from __future__ import annotations

import struct
from collections.abc import Mapping
from zlib import crc32

_OFFSET = struct.Struct(">q")
CHECK_NAME = "check"
"""The named string that holds :func:`names_check` of the others."""


class UnusableFile(Exception):
    """A state file that cannot be used as it is: what its backend reported (not a
    database, malformed, unreadable, refused) or what a check found. The partition's table
    sets the file aside and restores the partition in full (see
    :mod:`laneway.state.table`)."""


def row_check(key: bytes, value: bytes | None, offset: int) -> int:
    """The check of a row: a CRC-32 over ``offset`` (all 64 bits), ``key`` (its length too)
    and ``value`` (a deleted value differs from an empty one)."""
    check = crc32(key, crc32(_OFFSET.pack(offset), len(key)))
    return check ^ 0xFFFFFFFF if value is None else crc32(value, check)


def names_check(names: Mapping[str, str]) -> str:
    """The check of a file's named strings (all but :data:`CHECK_NAME`), as text."""
    text = "\n".join(f"{name}={names[name]}" for name in sorted(names) if name != CHECK_NAME)
    return str(crc32(text.encode("utf-8", "backslashreplace")))


def checked_names(names: dict[str, str]) -> dict[str, str]:
    """``names`` without their check, once it holds (an :class:`UnusableFile` otherwise). A
    file of the first format, which kept no check, is taken as it is: its ``format`` tells
    the table to restore it anew."""
    if not names:
        return names
    if not all(type(name) is str and type(text) is str for name, text in names.items()):
        raise UnusableFile("its named strings are not all strings (damaged)")
    check = names.pop(CHECK_NAME, None)
    if check is None:
        if names.get("format") == "1":
            return names
        raise UnusableFile("its named strings have no check")
    if check != names_check(names):
        raise UnusableFile("its named strings fail their check (damaged)")
    return names
