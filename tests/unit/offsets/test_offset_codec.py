"""The commit-metadata codec: format vectors, size guarantees, and tolerance of bad input."""

from __future__ import annotations

import base64
import logging
import random

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from laneway.offsets.claim_epochs import MAX_EPOCH
from laneway.offsets.codec import (
    DEFAULT_SPAN_LIMIT,
    MAX_OFFSET,
    decode,
    decode_window,
    encode,
    encode_window,
    max_span,
)

NINETEEN_DIGITS = 10**18  # as long in decimal as the largest offset, 2**63 - 1
UNLIMITED = 10**9
CODEC_LOGGER = "laneway.offsets.codec"


def varint_size(value: int) -> int:
    return max(1, (value.bit_length() + 6) // 7)


def reference_sizes(commit: int, finished: set[int]) -> tuple[int, int]:
    """(bitset bytes, runs bytes) computed independently of the codec."""
    ordered = sorted(finished)
    bitset = (ordered[-1] - commit + 7) // 8
    runs, previous_end, index = [], commit + 1, 0
    while index < len(ordered):
        start = index
        while index + 1 < len(ordered) and ordered[index + 1] == ordered[index] + 1:
            index += 1
        runs += [ordered[start] - previous_end, ordered[index] - ordered[start] + 1]
        previous_end = ordered[index] + 1
        index += 1
    return bitset, sum(varint_size(r) for r in runs)


def payload_of(metadata: str) -> tuple[str, int, bytes]:
    _, kind, commit, text = metadata.split(":")
    return kind, int(commit), base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def worst_case(commit: int, span: int) -> set[int]:
    """Every other offset, ending at ``commit + span``: runs cost more than a bitset."""
    return set(range(commit + span, commit, -2))


@st.composite
def finished_sets(
    draw: st.DrawFn, max_commit: int = MAX_OFFSET - UNLIMITED
) -> tuple[int, set[int]]:
    commit = draw(st.one_of(st.integers(0, 1000), st.integers(0, max_commit)))
    shape = draw(st.sampled_from(["dense", "sparse", "runs", "explicit"]))
    rng = random.Random(draw(st.integers(0, 2**32)))
    span = draw(st.integers(1, 30_000))
    if shape == "explicit":
        offsets = draw(st.sets(st.integers(1, 200), min_size=1, max_size=40))
        return commit, {commit + o for o in offsets}
    if shape == "dense":
        density = draw(st.floats(0.05, 1.0))
        chosen = {commit + o for o in range(1, span + 1) if rng.random() < density}
    elif shape == "sparse":
        chosen = {commit + rng.randint(1, span) for _ in range(rng.randint(1, 20))}
    else:
        chosen, position = set(), commit + rng.randint(1, 50)
        while position <= commit + span:
            length = rng.randint(1, 500)
            chosen.update(range(position, min(position + length, commit + span + 1)))
            position += length + rng.randint(1, 500)
    chosen.add(commit + span)
    return commit, chosen


def test_the_empty_set_is_the_empty_string() -> None:
    assert encode(42, []) == ""
    assert encode_window(42, bytes(10)) == ""
    assert decode("", 42) == frozenset()


def test_format_vectors_from_the_specification() -> None:
    # One finished offset right after the commit offset: bitset byte 0x01.
    assert encode(100, {101}) == "lw1:b:100:AQ"
    # Offset 6 unfinished, 7..10 and 12 finished: bits 1, 2, 3, 4 and 6 -> byte 0x5E.
    assert encode(5, {7, 8, 9, 10, 12}) == "lw1:b:5:Xg"
    # One offset 1000 past the commit: runs 999 (0xE7 0x07) unfinished, 1 finished.
    assert encode(0, {1000}) == "lw1:r:0:5wcB"
    for metadata, commit, expected in [
        ("lw1:b:100:AQ", 100, {101}),
        ("lw1:b:5:Xg", 5, {7, 8, 9, 10, 12}),
        ("lw1:r:0:5wcB", 0, {1000}),
    ]:
        assert decode(metadata, commit) == expected


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(finished_sets())
def test_round_trip_is_exact(case: tuple[int, set[int]]) -> None:
    commit, finished = case
    metadata = encode(commit, finished)
    assert metadata.isascii()
    assert decode(metadata, commit, span_limit=UNLIMITED) == finished


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(finished_sets())
def test_the_smaller_payload_wins_and_a_tie_goes_to_the_bitset(case: tuple[int, set[int]]) -> None:
    commit, finished = case
    kind, written_for, payload = payload_of(encode(commit, finished))
    bitset, runs = reference_sizes(commit, finished)
    assert written_for == commit
    assert len(payload) == min(bitset, runs)
    assert kind == ("r" if runs < bitset else "b")


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(finished_sets())
def test_the_window_encoder_agrees_with_the_set_encoder(case: tuple[int, set[int]]) -> None:
    commit, finished = case
    window = bytearray(max(finished) - commit + 7)  # trailing zeros are ignored
    for offset in finished:
        window[offset - commit - 1] = 3  # any non-zero byte means finished
    assert encode_window(commit, window) == encode(commit, finished)
    assert decode_window(encode(commit, finished), commit, span_limit=UNLIMITED) == bytes(
        1 if commit + 1 + i in finished else 0 for i in range(max(finished) - commit)
    )


def with_epoch(commit: int, finished: set[int], epoch: int = MAX_EPOCH) -> str:
    """Version-2 metadata of ``finished``, every record read in ``epoch``."""
    window = bytes(1 if commit + 1 + i in finished else 0 for i in range(max(finished) - commit))
    return encode_window(commit, window, [(0, epoch)])


def test_max_span_of_the_kafka_default() -> None:
    # 4096 bytes less the longest header of one epoch, "lw2:b:<19 digits>:<10 digits>:":
    # 4059 base64 characters, a 3044-byte bitset.
    assert max_span(4096) == 24_352
    assert DEFAULT_SPAN_LIMIT == 24_352


@pytest.mark.parametrize("max_bytes", [*range(0, 80), 100, 255, 256, 1000, 4095, 4096, 4097])
def test_max_span_is_exact(max_bytes: int) -> None:
    span = max_span(max_bytes)
    for commit in (NINETEEN_DIGITS, MAX_OFFSET - span - 1):
        if span:
            assert len(with_epoch(commit, worst_case(commit, span))) <= max_bytes
            every = set(range(commit + 1, commit + span + 1))
            assert len(with_epoch(commit, every)) <= max_bytes
            assert len(encode(commit, worst_case(commit, span))) <= max_bytes  # version 1
        assert len(with_epoch(commit, worst_case(commit, span + 1))) > max_bytes


def test_max_span_rejects_a_negative_size() -> None:
    with pytest.raises(ValueError, match="max_bytes"):
        max_span(-1)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(max_bytes=st.integers(0, 6000), data=st.data())
def test_any_set_within_max_span_fits(max_bytes: int, data: st.DataObject) -> None:
    span = max_span(max_bytes)
    assume(span > 0)
    commit = data.draw(st.integers(NINETEEN_DIGITS, MAX_OFFSET - span))
    rng = random.Random(data.draw(st.integers(0, 2**32)))
    density = data.draw(st.floats(0.0, 1.0))
    finished = {commit + o for o in range(1, span + 1) if rng.random() < density}
    metadata = encode(commit, finished)
    assert len(metadata.encode("ascii")) <= max_bytes
    assert decode(metadata, commit, span_limit=span) == finished
    if finished:
        epoch = data.draw(st.sampled_from([0, 7, MAX_EPOCH]))
        assert len(with_epoch(commit, finished, epoch)) <= max_bytes
        assert decode(with_epoch(commit, finished, epoch), commit, span_limit=span) == finished


def test_commit_offset_mismatch_is_ignored_quietly(caplog: pytest.LogCaptureFixture) -> None:
    metadata = encode(100, {105, 107})
    with caplog.at_level(logging.INFO, logger=CODEC_LOGGER):
        assert decode(metadata, 101) == frozenset()
        assert decode(metadata, 99) == frozenset()
    assert not [r for r in caplog.records if r.levelno >= logging.INFO]
    assert decode(metadata, 100) == {105, 107}


@pytest.mark.parametrize(
    "foreign", ["hello", "{}", "lw", "lwx:b:1:AQ", "LW1:b:1:AQ", " lw1:b:1:AQ"]
)
def test_metadata_of_other_tools_is_ignored_quietly(
    foreign: str, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.INFO, logger=CODEC_LOGGER):
        assert decode(foreign, 1) == frozenset()
    assert not [r for r in caplog.records if r.levelno >= logging.INFO]


@pytest.mark.parametrize("future", ["lw3:b:1:AQ", "lw3:anything at all", "lw10:", "lw0:b:1:AQ"])
def test_another_version_is_ignored_with_a_warning(
    future: str, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger=CODEC_LOGGER):
        assert decode(future, 1) == frozenset()
    assert any("version" in r.getMessage() for r in caplog.records)


@pytest.mark.parametrize(
    "corrupt",
    [
        "lw1:",
        "lw1:b:1:",  # an empty payload is never written
        "lw1:x:1:AQ",  # unknown kind
        "lw1:b:01:AQ",  # leading zero in the commit offset
        "lw1:b:+1:AQ",
        "lw1:b:1:AQ\n",
        "lw1:b:1:A Q",
        "lw1:b:1:AQ==",  # padding is not written
        "lw1:b:1:A",  # impossible base64 length
        "lw1:b:1:AR",  # non-zero unused bits: not canonical
        "lw1:b:1:AQA",  # bitset whose last byte is zero
        "lw1:b:1:AA",
        "lw1:r:1:AQ",  # runs: odd count
        "lw1:r:1:AQABAQ",  # runs: a zero-length run after the first (1, 0, 1, 1)
        "lw1:r:1:gAAB",  # runs: over-long varint (0x80 0x00)
        "lw1:r:1:AYA",  # runs: truncated varint
        "lw1:r:1:" + base64.urlsafe_b64encode(b"\xff" * 9 + b"\x01\x01").decode().rstrip("="),
        "lw1:b:1:AQ:AQ",
        "lw1:b:" + "1" * 20 + ":AQ",  # more digits than any offset has
        "lw1:b:" + "1" * 5000 + ":AQ",  # beyond Python's int-from-text limit: must not raise
        "lw1:b:1:ä",
    ],
)
def test_corrupt_metadata_is_ignored_with_a_warning(
    corrupt: str, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger=CODEC_LOGGER):
        assert decode(corrupt, 1) == frozenset()
    assert any("corrupt" in r.getMessage() for r in caplog.records)


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=60))
def test_arbitrary_text_never_raises(text: str) -> None:
    assert decode(text, 7) == frozenset() or text.startswith("lw1:")
    assert decode("lw1:" + text, 7) <= frozenset(range(8, 8 + DEFAULT_SPAN_LIMIT + 1))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(finished_sets(max_commit=10**6), st.data())
def test_damaged_metadata_never_raises_and_stays_in_bounds(
    case: tuple[int, set[int]], data: st.DataObject
) -> None:
    commit, finished = case
    metadata = encode(commit, finished)
    at = data.draw(st.integers(0, len(metadata) - 1))
    replacement = data.draw(st.sampled_from("AQ_-zb9r:=l0 "))
    damaged = metadata[:at] + replacement + metadata[at + 1 :]
    result = decode(damaged, commit, span_limit=1000)
    assert all(commit < o <= commit + 1000 for o in result)


def test_offsets_beyond_the_span_limit_are_dropped(caplog: pytest.LogCaptureFixture) -> None:
    dense = encode(0, {1, 2, 50, 99, 100, 101, 150})
    sparse = encode(0, {3, 10**15})  # runs: a tiny payload describing a huge span
    assert sparse.startswith("lw1:r:")
    with caplog.at_level(logging.INFO, logger=CODEC_LOGGER):
        assert decode(dense, 0, span_limit=100) == {1, 2, 50, 99, 100}
        assert decode(sparse, 0) == {3}
        assert decode(encode(0, set(range(1, 10**7))), 0, span_limit=5) == {1, 2, 3, 4, 5}
    assert len([r for r in caplog.records if "span limit" in r.getMessage()]) == 3


def test_encode_rejects_offsets_that_are_not_beyond_the_commit_offset() -> None:
    with pytest.raises(ValueError, match="not beyond"):
        encode(10, {10, 11})
    with pytest.raises(ValueError, match="commit offset"):
        encode(-1, {1})
    with pytest.raises(ValueError, match="commit offset"):
        encode_window(MAX_OFFSET + 1, b"\x01")
    with pytest.raises(ValueError, match="2\\*\\*63"):
        encode(0, {MAX_OFFSET + 1})
