"""Committed positions checked against the log end before a source hands them on.

A committed position comes from the group, which anyone with access can write: a tool
committing by hand, or a log that lost its tail (an unclean leader election on Kafka, a
torn segment on the embedded log) under offsets committed before. Two things in it could
make laneway skip a record that exists:

* finished offsets in the commit metadata (:mod:`laneway.offsets.codec`) at or past the
  partition's end name records not written yet; the record later written there would be
  skipped as "finished before the restart";
* a committed offset past the end makes the records written between the end and it
  invisible: they lie below the position reading starts at.

So every source checks each committed position it reads, at every assignment, against
the end it learns then (:func:`trusted_position`): finished offsets at or past the end are
dropped, and a committed offset past the end is not used at all (reading starts as if
nothing were committed: Kafka's ``auto.offset.reset``, which is what the client itself
does with an offset out of range; the embedded log's earliest retained record). Each case
is one WARNING per partition and assignment. The end only grows while a log is healthy,
and laneway only records offsets it fetched, so its own positions always pass.
"""

from __future__ import annotations

from laneway.logs import get_logger
from laneway.offsets.claim_epochs import clipped
from laneway.offsets.codec import claims_of, encode_runs
from laneway.types import CommitPosition

logger = get_logger(__name__)

SHOWN_RANGES = 5
"""Ranges of dropped offsets a warning lists one by one (the rest are counted)."""


def trusted_position(
    where: str, position: CommitPosition, end: int, fallback: str
) -> CommitPosition | None:
    """``position`` of the partition ``where`` (e.g. ``orders[3]``) as far as the log end
    ``end`` (the next offset to be written) allows.

    Returns ``None`` when the committed offset lies beyond ``end``: the caller then reads
    as if nothing were committed, which ``fallback`` describes for the warning (e.g.
    ``"reading starts where auto.offset.reset=earliest says"``). Otherwise the position,
    its metadata without the finished offsets at or past ``end`` (``position`` itself when
    nothing is dropped; metadata that is not usable stays, for the tracker to ignore as
    the codec says).
    """
    if position.offset > end:
        logger.warning(
            "%s: the committed offset %d is beyond the log end %d (the log lost its tail, "
            "or another tool committed it); it is not used, nor its commit metadata: %s",
            where,
            position.offset,
            end,
            fallback,
        )
        return None
    if not position.metadata:
        return position
    metadata, dropped = clip(position.metadata, position.offset, end)
    if not dropped:
        return position  # metadata that is not usable stays, for the tracker to ignore
    logger.warning(
        "%s: the commit metadata claims %s finished at or past the log end %d, where "
        "no record exists yet (another tool wrote it, or the log lost its tail); "
        "dropped, so the records written there will be processed",
        where,
        describe_ranges(dropped),
        end,
    )
    return CommitPosition(position.offset, metadata)


def clip(metadata: str, commit_offset: int, end: int) -> tuple[str, list[tuple[int, int]]]:
    """``metadata`` without the finished offsets at or past ``end``.

    Returns the metadata to use instead and the ranges ``(first, last)`` of finished
    offsets it dropped (``[]``: ``metadata`` comes back as it is, or ``""`` when it is not
    usable). Time and memory are linear in the length of ``metadata``, whatever span it
    claims.
    """
    claims = claims_of(metadata, commit_offset)
    if claims is None:
        return "", []
    runs, epochs = claims
    kept: list[int] = []
    dropped: list[tuple[int, int]] = []
    position = commit_offset + 1
    for index, length in enumerate(runs):  # unfinished, finished, unfinished, ...
        inside = min(length, max(0, end - position))
        if inside == length:
            kept.append(length)
        else:
            if inside:
                kept.append(inside)
            if index % 2:
                dropped.append((position + inside, position + length - 1))
        position += length
    if not dropped:
        return metadata, []
    if len(kept) % 2:
        kept.pop()  # an unfinished run last: the map ends with its last finished run
    if epochs is not None:
        epochs = clipped(epochs, sum(kept))  # the epochs of the claims kept stay theirs
    return encode_runs(commit_offset, kept, epochs), dropped


def describe_ranges(ranges: list[tuple[int, int]]) -> str:
    """``offsets 5-9, 12 (6 offsets)``: the first ranges and how many offsets in all."""
    shown = [str(a) if a == b else f"{a}-{b}" for a, b in ranges[:SHOWN_RANGES]]
    if len(ranges) > SHOWN_RANGES:
        shown.append(f"{len(ranges) - SHOWN_RANGES} more ranges")
    total = sum(b - a + 1 for a, b in ranges)
    return f"offsets {', '.join(shown)} ({total:,} offset{'s' if total != 1 else ''})"
