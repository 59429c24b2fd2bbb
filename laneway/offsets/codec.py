"""Commit-metadata codec: the finished offsets beyond a partition's committed offset.

laneway commits offset ``C`` of a partition only when ``C - 1`` and every earlier offset
are finished; ``C`` itself is unfinished by definition. Offsets above ``C`` that already
finished are stored in the commit's metadata string so that a restart or a rebalance
skips them instead of processing them again. Kafka caps that string at the broker
setting ``offset.metadata.max.bytes`` (default 4096) and fails the whole commit with
``OFFSET_METADATA_TOO_LARGE`` beyond it; :func:`max_span` tells the scheduler how far
past ``C`` it may let work finish so that any outcome still fits.

Format, version 1 (a specification; all text is ASCII, so characters equal bytes)
=================================================================================

::

    metadata := ""                                    (no finished offset beyond C)
              | "lw" VERSION ":" BODY                 (the version envelope)
    VERSION  := decimal digits                        ("1" for this format)
    BODY     := KIND ":" COMMIT ":" PAYLOAD           (version 1)
    KIND     := "b"                                   (bitset)
              | "r"                                   (runs)
    COMMIT   := "0" | [1-9][0-9]{0,18}                (the committed offset C, decimal)
    PAYLOAD  := [A-Za-z0-9_-]+                        (RFC 4648 section 5 "base64url" of
                                                       the payload bytes, without "=")

The offset set described is always a non-empty subset of ``C+1 .. C+span``; the empty set
is written as ``""``. The payload is canonical: exactly what an encoder produces.

*Bitset* (``b``): bit ``i`` of the payload is set iff offset ``C + 1 + i`` is finished,
where bit ``i`` is bit ``i % 8`` (``0`` = least significant) of byte ``i // 8``. The
payload has ``ceil(span / 8)`` bytes: its last byte is never zero.

*Runs* (``r``): unsigned LEB128 varints (7 bits per byte, least significant group first,
high bit set on every byte but the last, minimal length, at most 9 bytes) giving the
lengths of alternating runs that tile ``C+1 .. C+span``: first a run of unfinished
offsets (may be 0), then a run of finished ones (>= 1), then unfinished (>= 1), finished
(>= 1), and so on. The count is even and at least 2: the last run is a finished one.

Encoders produce both payloads and keep the one with fewer bytes, the bitset on a tie
(base64 length grows strictly with the byte count, so this also minimises the string).

Decoders, given the committed offset ``C`` they read the metadata with, must:

* return the empty set for ``""`` and for text that does not start with ``lw``, decimal
  digits and ``:`` (not written by laneway; another tool may own the metadata);
* ignore, with a warning, a version they do not implement;
* ignore a map whose ``COMMIT`` differs from ``C`` (written for another position);
* ignore, with a warning, anything else that breaks this grammar or the rules above,
  among them a map that is not canonical (one that does not encode again to the same
  text: a runs payload where the bitset would be no longer, a bitset where the runs
  would be shorter, an over-long varint) and one reaching past offset ``2**63 - 1``;
* drop finished offsets above ``C + limit`` for their own span limit (this bounds memory;
  dropped offsets are merely processed again, which at-least-once allows).

Ignoring metadata is always safe: it only means finished work is done again. Keeping it
is not always safe: a finished offset at or past the partition's end (metadata written by
another tool, or a log truncated by an unclean leader election) names a record that does
not exist yet, and the record later written there would be skipped. So a reader also drops
what lies at or past the end it knows (see :mod:`laneway.offsets.log_end`).
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Iterable
from itertools import compress

from laneway.logs import get_logger

logger = get_logger(__name__)

VERSION = 1
DEFAULT_MAX_METADATA_BYTES = 4096
"""Kafka's default ``offset.metadata.max.bytes``."""

MAX_OFFSET = 2**63 - 1
_BITSET = "b"
_RUNS = "r"
_WORST_HEADER = len(f"lw{VERSION}:{_BITSET}:{MAX_OFFSET}:")
_MAX_VARINT_BYTES = 9
_ENVELOPE = re.compile(r"lw([0-9]+):")
_V1 = re.compile(r"lw1:([br]):(0|[1-9][0-9]{0,18}):([A-Za-z0-9_-]+)")
_FINISHED_RUN = re.compile(rb"[^\x00]+")
_TO_BINARY_DIGITS = b"0" + b"1" * 255
"""Translation table: byte 0 -> ASCII ``0``, any other byte -> ASCII ``1``."""
_FROM_BINARY_DIGITS = bytes.maketrans(b"01", b"\x00\x01")


def max_span(max_bytes: int) -> int:
    """The largest span ``S`` such that any set within ``C+1 .. C+S`` encodes in ``max_bytes``.

    Exact for every commit offset up to ``2**63 - 1``: the bitset needs ``ceil(S / 8)``
    bytes whatever the set, the runs payload is only used when smaller, and the header is
    counted with a 19-digit commit offset. So a scheduler that lets no offset above
    ``C + S`` finish can always commit its metadata; ``S + 1`` cannot be guaranteed.
    Returns 0 when ``max_bytes`` cannot hold even one finished offset.
    """
    if max_bytes < 0:
        raise ValueError(f"max_bytes must be >= 0, got {max_bytes}")
    chars = max_bytes - _WORST_HEADER
    if chars < 2:
        return 0
    # base64 without padding: n bytes take 4*(n//3) + (0, 2, 3)[n % 3] characters.
    quads, rest = divmod(chars, 4)
    payload_bytes = 3 * quads + (0, 0, 1, 2)[rest]
    return 8 * payload_bytes


DEFAULT_SPAN_LIMIT = max_span(DEFAULT_MAX_METADATA_BYTES)


def encode(commit_offset: int, finished: Iterable[int]) -> str:
    """Encode ``finished`` (every offset ``> commit_offset``) as metadata relative to it.

    Returns ``""`` for an empty set. Cost is linear in the number of offsets (and in
    the span when the bitset wins, which bounds the span by 160 times that number).
    """
    _check_commit(commit_offset)
    offsets = sorted(set(finished))
    if not offsets:
        return ""
    if offsets[0] <= commit_offset:
        raise ValueError(
            f"finished offset {offsets[0]} is not beyond the commit offset {commit_offset}"
        )
    if offsets[-1] > MAX_OFFSET:
        raise ValueError(f"finished offset {offsets[-1]} is beyond 2**63-1")
    span = offsets[-1] - commit_offset
    if span <= 160 * len(offsets):
        window = bytearray(span)
        for offset in offsets:
            window[offset - commit_offset - 1] = 1
        return _encode_window(commit_offset, window)
    # Too sparse for a bitset to win: each of the <= 2n runs takes at most 9 bytes, less
    # than the span / 8 bytes a bitset would need.
    runs: list[int] = []
    expected = commit_offset + 1
    for offset in offsets:
        if offset != expected:
            runs.extend((offset - expected, 1))
        elif runs:
            runs[-1] += 1
        else:
            runs.extend((0, 1))
        expected = offset + 1
    return _assemble(_RUNS, commit_offset, _pack_varints(runs))


def encode_window(commit_offset: int, window: bytes | bytearray) -> str:
    """Encode a window: ``window[i] != 0`` means offset ``commit_offset + 1 + i`` finished.

    The fast path for a tracker that keeps per-offset states in a byte array: the work
    is done by C-level byte operations. Trailing zero bytes are ignored.
    """
    _check_commit(commit_offset)
    return _encode_window(commit_offset, window)


def decode(
    metadata: str, commit_offset: int, *, span_limit: int = DEFAULT_SPAN_LIMIT
) -> frozenset[int]:
    """The finished offsets stored in ``metadata`` for ``commit_offset``; never raises.

    Unusable metadata (not laneway's, another version, another commit offset, corrupt)
    yields the empty set; see the module docstring. Offsets above
    ``commit_offset + span_limit`` are dropped (they will be processed again); pass
    ``max_span(max_bytes)`` of the cap the writer used to keep everything it wrote.
    """
    window = decode_window(metadata, commit_offset, span_limit=span_limit)
    return frozenset(compress(range(commit_offset + 1, commit_offset + 1 + len(window)), window))


def decode_window(
    metadata: str, commit_offset: int, *, span_limit: int = DEFAULT_SPAN_LIMIT
) -> bytes:
    """Like :func:`decode`, as a window: byte ``i`` is 1 iff ``commit_offset + 1 + i`` finished.

    The window is empty or ends with a 1 and is at most ``span_limit`` bytes long.
    """
    parsed = _parse(metadata, commit_offset)
    if parsed is None:
        return b""
    kind, payload = parsed
    if kind == _BITSET:
        window = _checked_bitset(metadata, commit_offset, payload)
    else:
        runs = _checked_runs(metadata, commit_offset, payload)
        window = None if runs is None else _runs_to_window(runs, span_limit)
    if window is None:
        return b""
    if len(window) > span_limit:
        logger.info(
            "commit metadata for offset %d holds finished offsets beyond the span limit %d;"
            " those will be processed again",
            commit_offset,
            span_limit,
        )
        return window[:span_limit].rstrip(b"\x00")
    return window


def runs_of(metadata: str, commit_offset: int) -> list[int] | None:
    """The runs of usable metadata (see the format: unfinished, finished, ... lengths
    tiling ``commit_offset + 1 .. commit_offset + span``), else ``None``, logged as
    :func:`decode` does. Time and memory are linear in the length of ``metadata``,
    whatever span it claims."""
    parsed = _parse(metadata, commit_offset)
    if parsed is None:
        return None
    kind, payload = parsed
    if kind == _RUNS:
        return _checked_runs(metadata, commit_offset, payload)
    window = _checked_bitset(metadata, commit_offset, payload)
    return None if window is None else _window_runs(window)


def encode_runs(commit_offset: int, runs: list[int]) -> str:
    """The canonical metadata of runs as :func:`runs_of` returns them (``""`` for none)."""
    _check_commit(commit_offset)
    if not runs:
        return ""
    packed = _pack_varints(runs)
    if len(packed) < (sum(runs) + 7) // 8:
        return _assemble(_RUNS, commit_offset, packed)
    # The bitset is no longer than the runs, so the span is at most 8 bytes per run byte.
    return _encode_window(commit_offset, _runs_to_window(runs, sum(runs)))


def _parse(metadata: str, commit_offset: int) -> tuple[str, bytes] | None:
    """The kind and payload of version-1 metadata written for ``commit_offset``; ``None``
    (with the log line the module docstring asks for) when there is nothing to use."""
    if not metadata:
        return None
    envelope = _ENVELOPE.match(metadata)
    if envelope is None:
        logger.debug("commit metadata %.40r is not laneway's; ignored", metadata)
        return None
    if envelope.group(1) != str(VERSION):
        logger.warning(
            "commit metadata uses laneway format version %s, this release reads version %d;"
            " ignored (finished offsets beyond the commit point will be processed again)",
            envelope.group(1)[:20],
            VERSION,
        )
        return None
    body = _V1.fullmatch(metadata)
    if body is None:
        _corrupt(metadata, "malformed header or payload characters")
        return None
    kind, written_for, text = body.groups()
    if int(written_for) != commit_offset:
        logger.debug(
            "commit metadata was written for offset %s, not %d; ignored", written_for, commit_offset
        )
        return None
    try:
        payload = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except (binascii.Error, ValueError):
        _corrupt(metadata, "bad base64")
        return None
    if base64.urlsafe_b64encode(payload).rstrip(b"=").decode("ascii") != text:
        _corrupt(metadata, "non-canonical base64")
        return None
    return kind, payload


def _checked_runs(metadata: str, commit_offset: int, payload: bytes) -> list[int] | None:
    """The runs of a runs payload, if valid and canonical (else ``None``, with a warning)."""
    runs = _unpack_runs(payload)
    if runs is None:
        _corrupt(metadata, "invalid runs payload")
        return None
    span = sum(runs)
    if span > MAX_OFFSET - commit_offset:
        _corrupt(metadata, "finished offsets beyond 2**63-1")
        return None
    if len(payload) >= (span + 7) // 8:
        _corrupt(metadata, "a runs payload that is not canonical (the bitset would be no longer)")
        return None
    return runs


def _checked_bitset(metadata: str, commit_offset: int, payload: bytes) -> bytes | None:
    """The window of a bitset payload, if canonical (else ``None``, with a warning)."""
    if payload[-1] == 0:
        _corrupt(metadata, "a bitset whose last byte is zero")
        return None
    bits = format(int.from_bytes(payload, "little"), "b")[::-1]
    window = bits.encode("ascii").translate(_FROM_BINARY_DIGITS)
    if len(window) > MAX_OFFSET - commit_offset:
        _corrupt(metadata, "finished offsets beyond 2**63-1")
        return None
    if _encode_window(commit_offset, window) != metadata:
        _corrupt(metadata, "a bitset payload that is not canonical (the runs would be shorter)")
        return None
    return window


def _check_commit(commit_offset: int) -> None:
    if not 0 <= commit_offset <= MAX_OFFSET:
        raise ValueError(f"commit offset must be within 0 .. 2**63-1, got {commit_offset}")


def _encode_window(commit_offset: int, window: bytes | bytearray) -> str:
    window = bytes(window).rstrip(b"\x00")
    if not window:
        return ""
    span = len(window)
    bitset = int(window.translate(_TO_BINARY_DIGITS)[::-1], 2).to_bytes((span + 7) // 8, "little")
    # Every varint takes a byte or more: with as many runs as the bitset has bytes, it wins.
    runs = _window_runs(window, len(bitset))
    if runs is not None:
        packed = _pack_varints(runs)
        if len(packed) < len(bitset):
            return _assemble(_RUNS, commit_offset, packed)
    return _assemble(_BITSET, commit_offset, bitset)


def _assemble(kind: str, commit_offset: int, payload: bytes) -> str:
    text = base64.urlsafe_b64encode(payload).rstrip(b"=").decode("ascii")
    return f"lw{VERSION}:{kind}:{commit_offset}:{text}"


def _pack_varints(values: list[int]) -> bytes:
    """Unsigned LEB128 of each value, concatenated."""
    out = bytearray()
    for value in values:
        while value >= 0x80:
            out.append((value & 0x7F) | 0x80)
            value >>= 7
        out.append(value)
    return bytes(out)


def _window_runs(window: bytes, most: int | None = None) -> list[int] | None:
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


def _unpack_runs(payload: bytes) -> list[int] | None:
    """The varints of a runs payload; ``None`` unless they are minimal, complete, even in
    number (at least 2) and every run after the first is at least 1 long."""
    runs: list[int] = []
    value = shift = size = 0
    for byte in payload:
        value |= (byte & 0x7F) << shift
        shift += 7
        size += 1
        if size > _MAX_VARINT_BYTES:
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


def _runs_to_window(runs: list[int], span_limit: int) -> bytes:
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


def _corrupt(metadata: str, why: str) -> None:
    logger.warning(
        "corrupt laneway commit metadata (%s), ignored; finished offsets beyond the commit"
        " point will be processed again: %.60r",
        why,
        metadata,
    )
