"""Committed positions checked against the log end: what is dropped, what is kept, what is said."""

from __future__ import annotations

import logging
import random
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from laneway.offsets.codec import DEFAULT_SPAN_LIMIT, decode, encode
from laneway.offsets.log_end import clip, describe_ranges, trusted_position
from laneway.offsets.tracker import PartitionOffsets
from laneway.types import CommitPosition

LOGGER = "laneway.offsets.log_end"
UNLIMITED = 10**9


def ranges_of(offsets: set[int]) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for offset in sorted(offsets):
        if out and out[-1][1] == offset - 1:
            out[-1] = (out[-1][0], offset)
        else:
            out.append((offset, offset))
    return out


@st.composite
def maps_and_ends(draw: st.DrawFn) -> tuple[int, set[int], int]:
    commit = draw(st.one_of(st.integers(0, 50), st.integers(0, 10**15)))
    rng = random.Random(draw(st.integers(0, 2**32)))
    span = draw(st.sampled_from([1, 8, 100, 3000]))
    density = draw(st.floats(0.01, 1.0))
    finished = {commit + o for o in range(1, span + 1) if rng.random() < density}
    finished.add(commit + span)
    end = commit + draw(st.integers(0, span + 5))
    return commit, finished, end


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(maps_and_ends())
def test_clip_keeps_exactly_the_offsets_below_the_end(case: tuple[int, set[int], int]) -> None:
    commit, finished, end = case
    metadata, dropped = clip(encode(commit, finished), commit, end)
    kept = {o for o in finished if o < end}
    assert metadata == encode(commit, kept)  # canonical, as an encoder writes it
    assert decode(metadata, commit, span_limit=UNLIMITED) == kept
    assert dropped == ranges_of(finished - kept)
    if not dropped:
        assert metadata == encode(commit, finished)


def test_clip_of_a_huge_claimed_span_costs_only_the_text() -> None:
    # Two runs as varints: 0 unfinished, 10**15 finished. A window of that span would not
    # fit in memory; clipping works on the runs.
    claim = encode(5, {6, 10**15})
    started = time.perf_counter()
    metadata, dropped = clip(claim, 5, 100)
    assert time.perf_counter() - started < 0.1
    assert dropped == [(10**15, 10**15)]
    assert decode(metadata, 5) == {6}
    everything = "lw1:r:5:APr_________fw"  # runs 0 and 2**63 - 6: every offset finished
    assert decode(everything, 5) == frozenset(range(6, 6 + DEFAULT_SPAN_LIMIT))
    metadata, dropped = clip(everything, 5, 10)
    assert decode(metadata, 5) == {6, 7, 8, 9}
    assert dropped == [(10, 2**63 - 1)]


def test_unusable_metadata_clips_to_nothing() -> None:
    assert clip("written by another tool", 7, 100) == ("", [])
    assert clip("lw1:b:8:AQ", 7, 100) == ("", [])  # written for another commit offset
    assert clip("", 7, 100) == ("", [])


def test_a_position_within_the_log_end_is_kept_as_it_is(caplog: pytest.LogCaptureFixture) -> None:
    position = CommitPosition(10, encode(10, {12, 15}))
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        assert trusted_position("orders[0]", position, 16, "") is position
        assert trusted_position("orders[0]", CommitPosition(16), 16, "") == CommitPosition(16)
    assert not caplog.records


def test_finished_offsets_past_the_end_are_dropped_with_one_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    position = CommitPosition(10, encode(10, {11, *range(12, 21), 40}))
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        trusted = trusted_position("embedded:g: orders[3]", position, 12, "")
    assert trusted == CommitPosition(10, encode(10, {11}))
    [warning] = caplog.records
    text = warning.getMessage()
    assert text.startswith("embedded:g: orders[3]: the commit metadata claims offsets 12-20, 40")
    assert "(10 offsets) finished at or past the log end 12" in text


def test_a_committed_offset_past_the_end_is_not_used(caplog: pytest.LogCaptureFixture) -> None:
    position = CommitPosition(1000, encode(1000, {1001}))
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        assert trusted_position("orders[0]", position, 10, "reading starts at 0") is None
    [warning] = caplog.records
    assert "committed offset 1000 is beyond the log end 10" in warning.getMessage()
    assert warning.getMessage().endswith("reading starts at 0")


def test_a_tracker_restored_from_a_trusted_position_skips_nothing_unwritten() -> None:
    hostile = CommitPosition(10, encode(10, range(12, 21)))
    trusted = trusted_position("orders[0]", hostile, 11, "")
    assert trusted is not None
    tracker = PartitionOffsets(trusted, 4096)
    assert tracker.fetched(list(range(10, 30))) == set(), "skipped a record written later"
    untrusted = PartitionOffsets(hostile, 4096)
    assert untrusted.fetched(list(range(10, 30))) == set(range(12, 21))


def test_ranges_are_described_briefly() -> None:
    assert describe_ranges([(5, 5)]) == "offsets 5 (1 offset)"
    many = [(i * 10, i * 10 + 1) for i in range(8)]
    assert (
        describe_ranges(many)
        == "offsets 0-1, 10-11, 20-21, 30-31, 40-41, 3 more ranges (16 offsets)"
    )
