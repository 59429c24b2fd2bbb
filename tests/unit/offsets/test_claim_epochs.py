"""Commit metadata of version 2: the epochs of the claims, written, read back, checked.

A claim counts only for the record it was made about: the tracker skips a restored
finished offset only when the record fetched there has the claim's epoch, and a record
fetched again below what is tracked with another epoch shows the log was cut there."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence

import pytest

from laneway.offsets.claim_epochs import MAX_SEGMENTS, EpochRuns
from laneway.offsets.codec import decode, decode_claims, encode, encode_window, max_span
from laneway.offsets.log_end import clip
from laneway.offsets.offset_progress import OffsetProgress
from laneway.offsets.tracker import PartitionOffsets
from laneway.types import CommitPosition, Message, PartitionId

CODEC_LOGGER = "laneway.offsets.codec"


def window_of(commit: int, finished: set[int]) -> bytes:
    return bytes(1 if commit + 1 + i in finished else 0 for i in range(max(finished) - commit))


def test_claims_of_one_epoch_round_trip_as_version_2() -> None:
    metadata = encode_window(10, window_of(10, {11, 13, 14}), [(0, 7)])
    assert metadata.startswith("lw2:") and ":10:7:" in metadata
    assert decode_claims(metadata, 10) == (window_of(10, {11, 13, 14}), [(0, 7)])
    assert decode(metadata, 10) == {11, 13, 14}


def test_segments_start_at_the_first_claim_of_each_epoch() -> None:
    # Regions: epoch 3 from 11, 4 from 14 (no claim there: it starts at 15), 4 again, 5 from 20.
    window = window_of(10, {12, 15, 16, 21})
    metadata = encode_window(10, window, [(0, 3), (3, 4), (6, 4), (9, 5)])
    assert metadata.split(":")[3] == "3,4@4,10@5"
    assert decode_claims(metadata, 10)[1] == [(1, 3), (4, 4), (10, 5)]


def test_unknown_epochs_alone_are_written_as_version_1() -> None:
    window = window_of(0, {1, 2, 5})
    assert encode_window(0, window, [(0, -1)]) == encode(0, {1, 2, 5})
    assert decode_claims(encode(0, {1, 2, 5}), 0)[1] is None
    mixed = encode_window(0, window, [(0, -1), (3, 9)])
    assert mixed.startswith("lw2:") and decode_claims(mixed, 0)[1] == [(0, -1), (4, 9)]


def test_more_epochs_than_a_map_holds_keep_the_newest() -> None:
    finished = set(range(1, 11))
    regions = [(i * 2, 100 + i) for i in range(5)]
    window, segments = decode_claims(encode_window(0, window_of(0, finished), regions), 0)
    assert len(segments or []) == MAX_SEGMENTS
    assert window == bytes(2) + b"\x01" * 8, "the oldest epoch's claims are left out"


def test_a_map_too_large_for_the_cap_drops_the_oldest_epochs_first() -> None:
    max_bytes = 200
    span = max_span(max_bytes)
    finished = set(range(1, span + 1, 2))  # the worst case within the span
    regions = [(0, 2**31 - 1), (span // 2, 2**31 - 2), (span - 10, 2**31 - 3)]
    metadata = encode_window(0, window_of(0, finished), regions, max_bytes)
    assert len(metadata) <= max_bytes
    window, segments = decode_claims(metadata, 0, span_limit=span)
    assert segments is not None and segments[-1][1] == 2**31 - 3
    kept = {1 + i for i, flag in enumerate(window) if flag}
    assert kept and kept <= finished and max(kept) == max(finished)


@pytest.mark.parametrize(
    "broken",
    [
        "lw2:b:10:7,1@7:Bw",  # the same epoch twice in a row
        "lw2:b:10:7,5@8:Bw",  # a segment starting where nothing is claimed (15)
        "lw2:b:10:7,2@8,1@9:Bw",  # distances must grow
        "lw2:b:10:-1:Bw",  # every epoch unknown: version 1's to write
        "lw2:b:10:2147483648:Bw",  # beyond a 32-bit epoch
        "lw2:b:10:1,1@2,2@3,3@4,4@5:Pw",  # five segments
        "lw2:b:10:07:Bw",
        "lw2:b:10::Bw",
        "lw2:b:10:7:",
    ],
)
def test_epochs_that_break_their_rules_make_the_map_unusable(
    broken: str, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger=CODEC_LOGGER):
        assert decode_claims(broken, 10) == (b"", None)
    assert any("corrupt" in r.getMessage() for r in caplog.records)


def test_clipping_at_the_log_end_keeps_the_epochs_of_the_claims_kept() -> None:
    metadata = encode_window(10, window_of(10, {11, 13, 14}), [(0, 3), (2, 4)])
    clipped, dropped = clip(metadata, 10, 14)
    assert dropped == [(14, 14)]
    assert decode_claims(clipped, 10) == (window_of(10, {11, 13}), [(0, 3), (2, 4)])
    clipped, _ = clip(metadata, 10, 13)
    assert decode_claims(clipped, 10) == (window_of(10, {11}), [(0, 3)])


def restored(claims: set[int], epoch: int, commit: int = 10) -> PartitionOffsets:
    metadata = encode_window(commit, window_of(commit, claims), [(0, epoch)])
    return PartitionOffsets(CommitPosition(commit, metadata, epoch), 4096)


def test_a_claim_is_skipped_only_for_a_record_of_its_epoch() -> None:
    same = restored({11, 12}, epoch=5)
    assert same.fetched(list(range(10, 15)), [(10, 5)]) == {11, 12}
    assert same.take_refused() == []
    rewritten = restored({11, 12}, epoch=5)
    # The log lost 12 onwards; records written there since are of epoch 6.
    assert rewritten.fetched(list(range(10, 15)), [(10, 5), (12, 6)]) == {11}
    assert rewritten.take_refused() == [(12, 5, 6)]
    unknown = restored({11, 12}, epoch=5)
    assert unknown.fetched(list(range(10, 15))) == set(), "epochs not known: nothing trusted"


def test_a_version_1_claim_holds_for_any_record() -> None:
    tracker = PartitionOffsets(CommitPosition(10, encode(10, {11, 12})), 4096)
    assert tracker.fetched(list(range(10, 15)), [(10, 9)]) == {11, 12}


def test_a_claim_with_an_epoch_counts_only_once_its_record_is_fetched() -> None:
    tracker = restored({11, 12}, epoch=5)
    tracker.fetched([10], [(10, 5)])
    tracker.finished([10])
    assert tracker.commit_offset == 11, "11 and 12 are not vouched for before they are read"
    tracker.fetched([11, 12, 13], [(11, 5)])
    assert tracker.commit_offset == 13
    v1 = PartitionOffsets(CommitPosition(10, encode(10, {11, 12})), 4096)
    v1.fetched([10], [(10, 5)])
    v1.finished([10])
    assert v1.commit_offset == 13


def test_positions_carry_the_epochs_of_the_records_read() -> None:
    tracker = PartitionOffsets(CommitPosition(0), 4096)
    tracker.fetched(list(range(0, 20)), [(0, 1), (8, 2)])
    tracker.finished([*range(0, 5), 6, 9, 12])
    position = tracker.position()
    assert position is not None
    assert (position.offset, position.leader_epoch) == (5, 1), "record 4 was read in epoch 1"
    assert decode_claims(position.metadata, 5) == (window_of(5, {6, 9, 12}), [(0, 1), (3, 2)])
    again = PartitionOffsets(position, 4096)
    assert again.fetched(list(range(5, 20)), [(5, 1), (8, 2)]) == {6, 9, 12}
    epochless = PartitionOffsets(CommitPosition(0), 4096)
    epochless.fetched([0, 1, 2])
    epochless.finished([0, 2])
    assert epochless.position() == CommitPosition(1, encode(1, {2}), None)


def test_a_record_below_the_commit_of_a_newer_epoch_moves_the_commit_back() -> None:
    # Committed 13 after a record of epoch 0; the log was cut at 10 and written again in
    # epoch 1, and the client, validating the position, went back to 10.
    tracker = PartitionOffsets(CommitPosition(13, "", 0), 4096)
    assert not tracker.diverges(13, 1), "at or past the commit: nothing read there yet"
    assert not tracker.diverges(10, 0), "a replay of the same epoch"
    assert tracker.diverges(10, 1)
    assert tracker.truncate(10) == 0
    assert tracker.commit_offset == 10
    assert tracker.fetched(list(range(10, 15)), [(10, 1)]) == set()
    tracker.finished(range(10, 15))
    assert tracker.position() == CommitPosition(15, "", 1)


def test_a_cut_below_what_is_tracked_forgets_it_and_counts_the_unfinished() -> None:
    tracker = PartitionOffsets(CommitPosition(0), 4096)
    tracker.fetched(list(range(0, 15)), [(0, 3)])
    tracker.finished([0, 1, 2, 5, 11, 13])
    assert not tracker.diverges(11, 3)
    assert tracker.diverges(11, 4)
    # Unfinished at or after 11: 12 and 14.
    assert tracker.truncate(11) == 2
    assert tracker.next_offset == 11
    assert tracker.fetched(list(range(11, 14)), [(11, 4)]) == set()
    tracker.finished([3, 4, *range(6, 11)])
    assert tracker.commit_offset == 11
    position = tracker.position()
    assert position is not None and position.leader_epoch == 3


class Epochs:
    """RecordEpochs of a test: the epoch of every offset, per partition."""

    def __init__(self, table: Mapping[PartitionId, EpochRuns]) -> None:
        self.table = dict(table)

    def runs(self, start: int, messages: Sequence[Message]) -> EpochRuns | None:
        first, last = messages[0].offset, messages[-1].offset
        table = self.table[(messages[0].topic, messages[0].partition)]
        return [
            (max(offset, first), epoch)
            for i, (offset, epoch) in enumerate(table)
            if offset <= last and (i + 1 == len(table) or table[i + 1][0] > first)
        ]


class Committer:
    def __init__(self) -> None:
        self.commits: list[dict[PartitionId, CommitPosition]] = []

    def commit(self, positions: Mapping[PartitionId, CommitPosition]) -> None:
        self.commits.append(dict(positions))


def messages(offsets: range, value: bytes = b"v") -> list[Message]:
    return [Message("t", 0, o, b"k", value) for o in offsets]


def test_messages_of_records_cut_away_are_fenced_and_the_new_ones_wait_for_them(
    caplog: pytest.LogCaptureFixture,
) -> None:
    epochs = Epochs({("t", 0): [(0, 3)]})
    committer = Committer()
    progress = OffsetProgress(committer, 4096, epochs)
    progress.assign({("t", 0): CommitPosition(0)})
    old = progress.accept(messages(range(0, 10), b"old"))
    progress.settle(old[:4], [])  # 0-3 done; 4-9 still running
    epochs.table[("t", 0)] = [(0, 3), (6, 4)]  # the log was cut at 6, written again in epoch 4
    with caplog.at_level(logging.WARNING):
        assert progress.accept(messages(range(6, 12), b"new")) == [], "held until 6-9 are back"
    assert "cut at offset 6" in caplog.text and "4 message(s)" in caplog.text
    released = progress.settle(old[4:], [])  # 4, 5 count; 6-9 were records that are gone
    assert [(m.offset, m.value) for m in released] == [(o, b"new") for o in range(6, 12)]
    assert progress.counts.fenced == 4
    progress.commit([("t", 0)])
    assert committer.commits[-1][("t", 0)].offset == 6
    progress.settle(released, [])
    progress.commit([("t", 0)])
    assert committer.commits[-1][("t", 0)] == CommitPosition(12, "", 4)
    assert progress.counts.buffered == 0 and progress.counts.buffered_bytes == 0
