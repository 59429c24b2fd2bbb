"""Changelog records: how a key's new state is written to the changelog topic and read back.

A changelog record's key is the input message's key (the empty key for keyless messages),
its value the state's serialized bytes (``None``, a tombstone, for a deleted value) and its
``laneway.state.offset`` header the offset of the input message that made it, in ASCII
digits: restore keeps, per key, the record with the highest offset, and a replayed input at
or below it is not applied again. The record goes to the partition of the input's
partition number (the changelog is co-partitioned with the input).

This module imports nothing outside the standard library and :mod:`laneway.results`:
process-engine workers build changelog records with it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple, cast

from laneway.results import Produce

OFFSET_HEADER = "laneway.state.offset"
"""The header naming the input offset a changelog record was written for."""
KEYLESS = b""
"""The key of a keyless message's state (its partition's keyless state)."""

Entry = tuple[bytes | None, int]
"""A key's state as kept: its serialized value (``None``: deleted) and the input offset that
last changed it."""
Row = tuple[bytes, bytes | None, int]
"""A key with its :data:`Entry`, as a state file writes it."""


def changelog_record(
    topic: str, partition: int, key: bytes, data: bytes | None, offset: int
) -> Produce:
    """The changelog record of ``key``'s new state ``data`` made by input ``offset``."""
    headers = ((OFFSET_HEADER, b"%d" % offset),)
    # The fields are known good: skip Produce's checks (one record per message changing state).
    return tuple.__new__(Produce, (topic, data, key, headers, partition))


def offset_in(headers: Sequence[tuple[str, bytes | None]] | None) -> int | None:
    """The input offset a changelog record's ``headers`` name (``None``: not a laneway
    changelog record, or a damaged one: restore skips it, and says so)."""
    for name, value in headers or ():
        if name == OFFSET_HEADER and value is not None:
            try:
                return int(value)
            except ValueError:
                return None
    return None


class Change(NamedTuple):
    """What a changelog record made by :func:`changelog_record` says."""

    partition: int
    key: bytes
    value: bytes | None
    offset: int


def change_of(record: Produce) -> Change:
    """The partition, key, value and input offset of a record :func:`changelog_record` made."""
    headers = cast(Sequence[tuple[str, bytes]], record[3])
    return Change(cast(int, record[4]), cast(bytes, record[2]), record[1], int(headers[0][1]))
