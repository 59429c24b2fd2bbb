"""Commit-metadata codec: the finished offsets beyond a partition's committed offset.

laneway commits offset ``C`` of a partition only when ``C - 1`` and every earlier offset
are finished; ``C`` itself is unfinished by definition. Offsets above ``C`` that already
finished are stored in the commit's metadata string so that a restart or a rebalance
skips them instead of processing them again. Kafka caps that string at the broker
setting ``offset.metadata.max.bytes`` (default 4096) and fails the whole commit with
``OFFSET_METADATA_TOO_LARGE`` beyond it; :func:`max_span` tells the scheduler how far
past ``C`` it may let work finish so that any outcome still fits. The payload's bytes
(bitset or varint runs) are made and read by :mod:`laneway.offsets.payload`.

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

Format, version 2: the epochs of the claims
===========================================

::

    BODY     := KIND ":" COMMIT ":" EPOCHS ":" PAYLOAD    (version 2)

KIND, COMMIT and PAYLOAD as in version 1; EPOCHS gives the epoch (Kafka's leader epoch,
the embedded log's generation) of the record each finished offset was read in, as
:mod:`laneway.offsets.claim_epochs` specifies. A finished offset counts only for a record of
that epoch: a record written at that offset later (after the log lost its tail) is processed.
Encoders write version 2 when an epoch is known, version 1 when none is (then the map reads
as before on any release). A release reads every version up to its own and ignores a newer
one with a warning: the consumer then starts at the committed offset, so a rolling upgrade
only ever processes work again, never skips it.

Decoders, given the committed offset ``C`` they read the metadata with, must:

* return the empty set for ``""`` and for text that does not start with ``lw``, decimal
  digits and ``:`` (not written by laneway; another tool may own the metadata);
* ignore, with a warning, a version they do not implement (one newer than theirs);
* ignore a map whose ``COMMIT`` differs from ``C`` (written for another position);
* ignore, with a warning, anything else that breaks this grammar or the rules above,
  among them a map that is not canonical (one that does not encode again to the same
  text: a runs payload where the bitset would be no longer, a bitset where the runs
  would be shorter, an over-long varint, epochs that break their rules) and one reaching
  past offset ``2**63 - 1``;
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
from laneway.offsets.claim_epochs import (
    MAX_EPOCH,
    UNKNOWN,
    Segments,
    capped,
    clipped,
    format_segments,
    is_canonical,
    parse_segments,
    segments_of_window,
)
from laneway.offsets.payload import (
    BITSET,
    FLAGS,
    RUNS,
    bitset_window,
    encode_payload,
    pack_varints,
    runs_to_window,
    unpack_runs,
    window_runs,
)

logger = get_logger(__name__)

VERSION = 2
"""The newest format this release reads and writes."""
DEFAULT_MAX_METADATA_BYTES = 4096
"""Kafka's default ``offset.metadata.max.bytes``."""

MAX_OFFSET = 2**63 - 1
_WORST_HEADER = len(f"lw{VERSION}:{BITSET}:{MAX_OFFSET}:{MAX_EPOCH}:")
"""The longest header of a map whose claims are of one epoch."""
_ENVELOPE = re.compile(r"lw([0-9]+):")
_V1 = re.compile(r"lw1:([br]):(0|[1-9][0-9]{0,18}):([A-Za-z0-9_-]+)")
_V2 = re.compile(r"lw2:([br]):(0|[1-9][0-9]{0,18}):([-,@0-9]+):([A-Za-z0-9_-]+)")
_READS = ("1", "2")


def max_span(max_bytes: int) -> int:
    """The largest span ``S`` such that any set within ``C+1 .. C+S`` encodes in ``max_bytes``
    (with the epoch of its records, when they share one).

    Exact for every commit offset up to ``2**63 - 1``: the bitset needs ``ceil(S / 8)``
    bytes whatever the set, the runs payload is only used when smaller, and the header is
    counted with a 19-digit commit offset and a 10-digit epoch. So a scheduler that lets no
    offset above ``C + S`` finish can always commit its metadata; ``S + 1`` cannot be
    guaranteed. (Claims of several epochs take more room: :func:`encode_window` given the
    cap leaves out the oldest epochs' claims until the map fits.) Returns 0 when
    ``max_bytes`` cannot hold even one finished offset.
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
    return _assemble(RUNS, commit_offset, pack_varints(runs), None)


def encode_window(
    commit_offset: int,
    window: bytes | bytearray,
    epochs: Segments | None = None,
    max_bytes: int | None = None,
) -> str:
    """Encode a window: ``window[i] != 0`` means offset ``commit_offset + 1 + i`` finished.

    The fast path for a tracker that keeps per-offset states in a byte array: the work
    is done by C-level byte operations. Trailing zero bytes are ignored. ``epochs`` gives
    the epoch of the records read at the window's offsets as regions ``(distance, epoch)``
    (see :func:`laneway.offsets.claim_epochs.segments_of_window`): when a claimed record's
    epoch is known the map is of version 2, else of version 1. The claims of older epochs
    than the last four are left out, and with ``max_bytes`` those of the oldest epochs
    until the map fits (a window within :func:`max_span` fits with one epoch).
    """
    _check_commit(commit_offset)
    if epochs is None:
        return _encode_window(commit_offset, window)
    claimed = bytearray(bytes(window).rstrip(b"\x00").translate(FLAGS))
    if not claimed:
        return ""
    segments = capped(claimed, segments_of_window(claimed, epochs))
    while True:
        if all(epoch == UNKNOWN for _, epoch in segments):
            return _encode_window(commit_offset, claimed)
        kind, payload = encode_payload(claimed)
        text = _assemble(kind, commit_offset, payload, segments)
        if max_bytes is None or len(text) <= max_bytes or len(segments) == 1:
            return text
        segments = capped(claimed, segments, len(segments) - 1)


def decode(
    metadata: str, commit_offset: int, *, span_limit: int = DEFAULT_SPAN_LIMIT
) -> frozenset[int]:
    """The finished offsets stored in ``metadata`` for ``commit_offset``; never raises.

    Unusable metadata (not laneway's, a newer version, another commit offset, corrupt)
    yields the empty set; see the module docstring. Offsets above
    ``commit_offset + span_limit`` are dropped (they will be processed again); pass
    ``max_span(max_bytes)`` of the cap the writer used to keep everything it wrote. The
    epochs of a version-2 map are not returned: see :func:`decode_claims`.
    """
    window = decode_window(metadata, commit_offset, span_limit=span_limit)
    return frozenset(compress(range(commit_offset + 1, commit_offset + 1 + len(window)), window))


def decode_window(
    metadata: str, commit_offset: int, *, span_limit: int = DEFAULT_SPAN_LIMIT
) -> bytes:
    """Like :func:`decode`, as a window: byte ``i`` is 1 iff ``commit_offset + 1 + i`` finished.

    The window is empty or ends with a 1 and is at most ``span_limit`` bytes long.
    """
    return decode_claims(metadata, commit_offset, span_limit=span_limit)[0]


def decode_claims(
    metadata: str, commit_offset: int, *, span_limit: int = DEFAULT_SPAN_LIMIT
) -> tuple[bytes, Segments | None]:
    """The window of :func:`decode_window` and the epochs of its claims: the segments of a
    version-2 map (see :mod:`laneway.offsets.claim_epochs`), ``None`` for version 1 (claims
    without epochs)."""
    claims = claims_of(metadata, commit_offset)
    if claims is None:
        return b"", None
    runs, segments = claims
    window = runs_to_window(runs, span_limit)
    if len(window) > span_limit:
        logger.info(
            "commit metadata for offset %d holds finished offsets beyond the span limit %d;"
            " those will be processed again",
            commit_offset,
            span_limit,
        )
        window = window[:span_limit].rstrip(b"\x00")
    if segments is not None:
        segments = clipped(segments, len(window))
    return window, segments


def runs_of(metadata: str, commit_offset: int) -> list[int] | None:
    """The runs of usable metadata (see the format: unfinished, finished, ... lengths
    tiling ``commit_offset + 1 .. commit_offset + span``), else ``None``, logged as
    :func:`decode` does. Time and memory are linear in the length of ``metadata``,
    whatever span it claims."""
    claims = claims_of(metadata, commit_offset)
    return None if claims is None else claims[0]


def claims_of(metadata: str, commit_offset: int) -> tuple[list[int], Segments | None] | None:
    """The runs (as :func:`runs_of`) and epoch segments (``None`` for version 1) of usable
    metadata, else ``None``; linear in the length of ``metadata``."""
    parsed = _parse(metadata, commit_offset)
    if parsed is None:
        return None
    kind, payload, epochs = parsed
    if kind == RUNS:
        runs = _checked_runs(metadata, commit_offset, payload)
    else:
        window = _checked_bitset(metadata, commit_offset, payload)
        runs = None if window is None else window_runs(window)
    if runs is None:
        return None
    if epochs is None:
        return runs, None
    segments = parse_segments(epochs, runs[0])
    if segments is None or not is_canonical(segments, runs):
        _corrupt(metadata, "epochs that break their rules")
        return None
    return runs, segments


def encode_runs(commit_offset: int, runs: list[int], epochs: Segments | None = None) -> str:
    """The canonical metadata of runs as :func:`runs_of` returns them (``""`` for none),
    with the epoch segments :func:`claims_of` returns (``None``: version 1). Segments that
    no longer start at a claim of ``runs`` must have been dropped (see
    :func:`laneway.offsets.claim_epochs.clipped`)."""
    _check_commit(commit_offset)
    if not runs:
        return ""
    if epochs is not None and all(epoch == UNKNOWN for _, epoch in epochs):
        epochs = None
    packed = pack_varints(runs)
    if len(packed) < (sum(runs) + 7) // 8:
        return _assemble(RUNS, commit_offset, packed, epochs)
    # The bitset is no longer than the runs, so the span is at most 8 bytes per run byte.
    kind, payload = encode_payload(runs_to_window(runs, sum(runs)))
    return _assemble(kind, commit_offset, payload, epochs)


def _parse(metadata: str, commit_offset: int) -> tuple[str, bytes, str | None] | None:
    """The kind, payload and epochs text (``None`` in version 1) of metadata written for
    ``commit_offset``; ``None`` (with the log line the module docstring asks for) when
    there is nothing to use."""
    if not metadata:
        return None
    envelope = _ENVELOPE.match(metadata)
    if envelope is None:
        logger.debug("commit metadata %.40r is not laneway's; ignored", metadata)
        return None
    if envelope.group(1) not in _READS:
        logger.warning(
            "commit metadata uses laneway format version %s, this release reads versions up to"
            " %d; ignored: the partition starts at its committed offset (finished offsets"
            " beyond it will be processed again)",
            envelope.group(1)[:20],
            VERSION,
        )
        return None
    epochs: str | None = None
    if envelope.group(1) == "1":
        body = _V1.fullmatch(metadata)
        if body is None:
            _corrupt(metadata, "malformed header or payload characters")
            return None
        kind, written_for, text = body.groups()
    else:
        body = _V2.fullmatch(metadata)
        if body is None:
            _corrupt(metadata, "malformed header, epochs or payload characters")
            return None
        kind, written_for, epochs, text = body.groups()
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
    return kind, payload, epochs


def _checked_runs(metadata: str, commit_offset: int, payload: bytes) -> list[int] | None:
    """The runs of a runs payload, if valid and canonical (else ``None``, with a warning)."""
    runs = unpack_runs(payload)
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
    window = bitset_window(payload)
    if len(window) > MAX_OFFSET - commit_offset:
        _corrupt(metadata, "finished offsets beyond 2**63-1")
        return None
    if encode_payload(window) != (BITSET, payload):
        _corrupt(metadata, "a bitset payload that is not canonical (the runs would be shorter)")
        return None
    return window


def _check_commit(commit_offset: int) -> None:
    if not 0 <= commit_offset <= MAX_OFFSET:
        raise ValueError(f"commit offset must be within 0 .. 2**63-1, got {commit_offset}")


def _encode_window(commit_offset: int, window: bytes | bytearray) -> str:
    """Version-1 metadata of ``window`` (claims without epochs)."""
    window = bytes(window).rstrip(b"\x00")
    if not window:
        return ""
    kind, payload = encode_payload(window)
    return _assemble(kind, commit_offset, payload, None)


def _assemble(kind: str, commit_offset: int, payload: bytes, epochs: Segments | None) -> str:
    text = base64.urlsafe_b64encode(payload).rstrip(b"=").decode("ascii")
    if epochs is None:
        return f"lw1:{kind}:{commit_offset}:{text}"
    return f"lw2:{kind}:{commit_offset}:{format_segments(epochs)}:{text}"


def _corrupt(metadata: str, why: str) -> None:
    logger.warning(
        "corrupt laneway commit metadata (%s), ignored; finished offsets beyond the commit"
        " point will be processed again: %.60r",
        why,
        metadata,
    )
