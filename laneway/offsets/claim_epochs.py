"""The epochs of the finished offsets a commit-metadata map claims (its version 2).

A finished offset in the metadata is a claim about one record: the record laneway read at
that offset. An offset alone does not name a record for good: a Kafka log that loses its
tail to an unclean leader election is written again from the cut, and the embedded log cuts
a torn tail on open and appends after it. Kafka tells the records apart by the *leader
epoch* they were written in (KIP-101/KIP-320: an offset is written once per epoch), the
embedded log by its *generation*; both are called epochs here. So a map of version 2 carries
the epoch of every record it claims, and a claim counts only for a record of that epoch.

Epochs are kept as *segments* over the claimed offsets in increasing order: ``(distance,
epoch)`` where ``distance`` is the first claimed offset of the segment minus ``C + 1`` (``C``
the committed offset), and the segment runs to the next one. In a map's text::

    EPOCHS   := EPOCH ("," DISTANCE "@" EPOCH)*        (at most MAX_SEGMENTS segments)
    EPOCH    := "-1" | "0" | [1-9][0-9]{0,9}            (-1: unknown; at most 2**31 - 1)
    DISTANCE := [1-9][0-9]{0,18}

The first segment starts at the first claimed offset (its distance is not written); each
later one starts at a claimed offset, distances strictly increasing, and its epoch differs
from the one before. ``-1`` marks records whose epoch was not known when they were read;
a map whose every epoch is ``-1`` is written as version 1. :func:`segments_of_window`
makes canonical segments from the epochs of any regions of offsets.
"""

from __future__ import annotations

import re

UNKNOWN = -1
"""The epoch of a record whose epoch is not known (Kafka's ``-1``)."""
MAX_EPOCH = 2**31 - 1
MAX_SEGMENTS = 4
"""Segments a map holds at most. When a window has more, or its map would not fit the
metadata cap with them all, the claims of its oldest segments are left out of the map
(they are processed again after a restart): several epochs within one commit window means
several leader changes within seconds."""

Segments = list[tuple[int, int]]
"""``(distance, epoch)`` per segment, in increasing distance."""

EpochRuns = list[tuple[int, int]]
"""The epochs of a batch of records as a source read them: ``(first offset, epoch)`` in
increasing offset, each epoch holding up to the next run."""

_SEGMENTS = re.compile(r"(-1|0|[1-9][0-9]{0,9})((?:,[1-9][0-9]{0,18}@(?:-1|0|[1-9][0-9]{0,9}))*)")
_LATER = re.compile(r",([0-9]+)@(-?[0-9]+)")


def format_segments(segments: Segments) -> str:
    """The EPOCHS text of canonical ``segments``."""
    first = str(segments[0][1])
    return first + "".join(f",{distance}@{epoch}" for distance, epoch in segments[1:])


def parse_segments(text: str, first_claim: int) -> Segments | None:
    """The segments of EPOCHS text whose first claim lies at ``first_claim``, or ``None``
    when the text breaks the grammar."""
    match = _SEGMENTS.fullmatch(text)
    if match is None:
        return None
    segments: Segments = [(first_claim, int(match.group(1)))]
    for later in _LATER.finditer(match.group(2)):
        segments.append((int(later.group(1)), int(later.group(2))))
    if len(segments) > MAX_SEGMENTS or any(epoch > MAX_EPOCH for _, epoch in segments):
        return None
    return segments


def is_canonical(segments: Segments, claimed: list[int]) -> bool:
    """Whether parsed ``segments`` follow the rules for the claimed offsets whose runs are
    ``claimed`` (the codec's runs: unfinished, finished, ... lengths from ``C + 1``)."""
    if all(epoch == UNKNOWN for _, epoch in segments):
        return False  # written as version 1
    starts = _claim_starts(claimed, [distance for distance, _ in segments[1:]])
    previous = segments[0]
    for (distance, epoch), found in zip(segments[1:], starts, strict=True):
        if distance <= previous[0] or epoch == previous[1] or not found:
            return False
        previous = (distance, epoch)
    return True


def _claim_starts(runs: list[int], distances: list[int]) -> list[bool]:
    """For each of increasing ``distances``, whether ``runs`` claim the offset there."""
    found: list[bool] = []
    position = 0
    index = 0
    for distance in distances:
        while index < len(runs) and position + runs[index] <= distance:
            position += runs[index]
            index += 1
        found.append(index < len(runs) and index % 2 == 1)
    return found


def segments_of_window(window: bytes | bytearray, regions: Segments) -> Segments:
    """Canonical segments of the claims in ``window`` (byte ``i`` non-zero: the offset at
    distance ``i`` is claimed), given the epoch of every offset by ``regions``: ``(distance,
    epoch)`` in increasing distance, each epoch holding from its distance to the next one's
    (offsets before the first region have an unknown epoch)."""
    segments: Segments = []
    bounds = regions if regions and regions[0][0] <= 0 else [(0, UNKNOWN), *regions]
    for index, (distance, epoch) in enumerate(bounds):
        end = bounds[index + 1][0] if index + 1 < len(bounds) else len(window)
        first = window.find(1, max(0, distance), max(0, end)) if end > distance else -1
        if first < 0 or (segments and segments[-1][1] == epoch):
            continue
        segments.append((first, epoch))
    return segments


def capped(window: bytearray, segments: Segments, most: int = MAX_SEGMENTS) -> Segments:
    """The last ``most`` of ``segments``; the claims of the others are cleared from
    ``window`` (in place)."""
    if len(segments) <= most:
        return segments
    kept = segments[-most:]
    window[: kept[0][0]] = bytes(kept[0][0])
    return kept


def clipped(segments: Segments, span: int) -> Segments:
    """The segments that still start within ``span`` (after claims at or past it were
    dropped: the others keep their first claim, so they stay canonical)."""
    return [(distance, epoch) for distance, epoch in segments if distance < span]
