"""The payload of a commit-metadata map: the finished offsets beyond the commit as bytes,
either a bitset or varint runs, whichever is shorter (the format is in
:mod:`laneway.offsets.codec`, which adds the text envelope, the epochs and the checks).

A *window* is a byte array where byte ``i`` is non-zero when offset ``C + 1 + i`` is
finished; *runs* are the lengths of its alternating unfinished and finished stretches,
starting with an unfinished one (possibly 0 long) and ending with a finished one.
"""

from __future__ import annotations

import re

BITSET = "b"
"""The kind of a bitset payload: bit ``i`` (little-endian) is window byte ``i``."""
RUNS = "r"
"""The kind of a runs payload: unsigned LEB128 varints, one per run."""
MAX_VARINT_BYTES = 9
"""The longest varint a runs payload may hold (a run up to 2**63 - 1)."""
FLAGS = b"\x00" + b"\x01" * 255
"""Translation table: byte 0 -> 0, any other byte -> 1."""
_FINISHED_RUN = re.compile(rb"[^\x00]+")
_TO_BINARY_DIGITS = b"0" + b"1" * 255
"""Translation table: byte 0 -> ASCII ``0``, any other byte -> ASCII ``1``."""
_FROM_BINARY_DIGITS = bytes.maketrans(b"01", b"\x00\x01")


def bitset_window(payload: bytes) -> bytes:
    """The window a bitset payload holds (it ends with its highest set bit)."""
    bits = format(int.from_bytes(payload, "little"), "b")[::-1]
    return bits.encode("ascii").translate(_FROM_BINARY_DIGITS)


def encode_payload(window: bytes | bytearray) -> tuple[str, bytes]:
    """The kind and payload of a window that ends with a claim."""
    span = len(window)
    bitset = int(bytes(window).translate(_TO_BINARY_DIGITS)[::-1], 2).to_bytes(
        (span + 7) // 8, "little"
    )
    # Every varint takes a byte or more: with as many runs as the bitset has bytes, it wins.
    runs = window_runs(bytes(window), len(bitset))
    if runs is not None:
        packed = pack_varints(runs)
        if len(packed) < len(bitset):
            return RUNS, packed
    return BITSET, bitset


def pack_varints(values: list[int]) -> bytes:
    """Unsigned LEB128 of each value, concatenated."""
    out = bytearray()
    for value in values:
        while value >= 0x80:
            out.append((value & 0x7F) | 0x80)
            value >>= 7
        out.append(value)
    return bytes(out)


def window_runs(window: bytes, most: int | None = None) -> list[int] | None:
    """The runs of a window that ends with a finished offset (``None``: ``most`` or more)."""
    runs: list[int] = []
    end = 0
    for match in _FINISHED_RUN.finditer(window):
        start, stop = match.span()
        runs.extend((start - end, stop - start))
        end = stop
        if most is not None and len(runs) >= most:
            return None
    return runs


def unpack_runs(payload: bytes) -> list[int] | None:
    """The varints of a runs payload; ``None`` unless they are minimal, complete, even in
    number (at least 2) and every run after the first is at least 1 long."""
    runs: list[int] = []
    value = shift = size = 0
    for byte in payload:
        value |= (byte & 0x7F) << shift
        shift += 7
        size += 1
        if size > MAX_VARINT_BYTES:
            return None
        if byte & 0x80:
            continue
        if byte == 0 and size > 1:  # an over-long encoding
            return None
        runs.append(value)
        value = shift = size = 0
    if size or len(runs) < 2 or len(runs) % 2 or 0 in runs[1:]:
        return None
    return runs


def runs_to_window(runs: list[int], span_limit: int) -> bytes:
    """The window of valid runs; past ``span_limit`` it stops, one byte too long."""
    window = bytearray()
    for index in range(0, len(runs), 2):
        room = span_limit + 1 - len(window)
        if runs[index] >= room:
            return bytes(window) + bytes(room)
        window += bytes(runs[index])
        window += b"\x01" * min(runs[index + 1], room - runs[index])
        if len(window) > span_limit:
            break
    return bytes(window)
