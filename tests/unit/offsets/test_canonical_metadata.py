"""The codec reads only canonical maps, as its specification says: a map that does not
encode again to the same text is ignored with a warning (the commit point is kept)."""

from __future__ import annotations

import base64
import logging

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from laneway.offsets.codec import decode, encode, encode_runs, runs_of
from laneway.offsets.tracker import PartitionOffsets
from laneway.types import CommitPosition

UNLIMITED = 10**6
CODEC_LOGGER = "laneway.offsets.codec"


def varints(values: list[int]) -> bytes:
    out = bytearray()
    for value in values:
        while value >= 0x80:
            out.append((value & 0x7F) | 0x80)
            value >>= 7
        out.append(value)
    return bytes(out)


def text(payload: bytes) -> str:
    return base64.urlsafe_b64encode(payload).rstrip(b"=").decode()


@pytest.mark.parametrize(
    ("metadata", "meant"),
    [
        # runs 0,1 (offset 11) as runs: 2 bytes, where the bitset takes 1 (0x01)
        ("lw1:r:10:" + text(varints([0, 1])), {11}),
        # runs 2,3,1,2 (offsets 13-15, 17-18): 4 run bytes, the bitset 1 (0xDC)
        ("lw1:r:10:" + text(varints([2, 3, 1, 2])), {13, 14, 15, 17, 18}),
        # runs 0,16 (offsets 11-26): 2 bytes either way, and a tie goes to the bitset
        ("lw1:r:10:" + text(varints([0, 16])), set(range(11, 27))),
        # offset 1000 as a bitset: 125 bytes, where runs take 3
        ("lw1:b:0:" + text(bytes(124) + b"\x80"), {1000}),
    ],
)
def test_a_map_in_the_wrong_kind_is_ignored_with_a_warning(
    metadata: str, meant: set[int], caplog: pytest.LogCaptureFixture
) -> None:
    commit = int(metadata.split(":")[2])
    assert encode(commit, meant) != metadata
    with caplog.at_level(logging.WARNING, logger=CODEC_LOGGER):
        assert decode(metadata, commit, span_limit=UNLIMITED) == frozenset()
        assert runs_of(metadata, commit) is None
    messages = [r.getMessage() for r in caplog.records]
    assert messages and all("not canonical" in m for m in messages)


def test_a_map_reaching_past_the_largest_offset_is_ignored(
    caplog: pytest.LogCaptureFixture,
) -> None:
    beyond = "lw1:r:5:" + text(varints([0, 2**63 - 5]))  # one past 2**63 - 1
    with caplog.at_level(logging.WARNING, logger=CODEC_LOGGER):
        assert decode(beyond, 5) == frozenset()
    assert "beyond 2**63-1" in caplog.records[0].getMessage()


def test_a_tracker_given_a_non_canonical_map_starts_from_the_committed_offset() -> None:
    tracker = PartitionOffsets(CommitPosition(10, "lw1:r:10:" + text(varints([0, 1]))), 4096)
    assert tracker.finished_beyond_count == 0
    assert tracker.fetched([10, 11, 12]) == set()
    assert tracker.commit_offset == 10


@st.composite
def payload_texts(draw: st.DrawFn) -> tuple[int, str]:
    commit = draw(st.integers(0, 1000))
    kind = draw(st.sampled_from("br"))
    if kind == "r" and draw(st.booleans()):
        runs = draw(st.lists(st.integers(0, 300), min_size=2, max_size=12))
        payload = varints(runs[: len(runs) // 2 * 2])
    else:
        payload = draw(st.binary(min_size=1, max_size=12))
    return commit, f"lw1:{kind}:{commit}:{text(payload)}"


@settings(max_examples=1000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(payload_texts())
def test_whatever_is_read_encodes_again_to_the_same_text(case: tuple[int, str]) -> None:
    commit, metadata = case
    limit = 10**5  # random varints may claim spans up to 2**63: keep the window small
    finished = decode(metadata, commit, span_limit=limit)
    runs = runs_of(metadata, commit)
    if runs is None:
        assert not finished
        return
    assert encode_runs(commit, runs) == metadata
    if sum(runs) <= limit:
        assert finished and encode(commit, finished) == metadata
