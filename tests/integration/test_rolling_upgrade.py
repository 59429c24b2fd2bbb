"""Members of two laneway releases in one group: the commit-metadata codec is versioned.

A member reading a map written by a newer release than its own (a format it does not
know) starts at the committed offset and processes everything after it: it may do work
again, it never skips. A map of the previous format (version 1, no epochs) keeps its
finished offsets. Both on the embedded log and on the real broker, committed the way a
member of the other release would."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

import pytest
from topics import SOURCES, LogTopic, commit_by_hand

import laneway
from laneway.offsets.codec import decode_claims, encode
from laneway.types import Message

GROUP = "upgrade"


def future_map(commit: int, finished: set[int]) -> str:
    """What a release with a format version 3 might write: a header this release knows
    (``lw<version>:``) and a body it does not (here: the finished offsets in decimal)."""
    return f"lw3:{commit}:" + ";".join(str(o) for o in sorted(finished)) + ":epochs=7"


def commit_as_another_member(topic: LogTopic, offset: int, metadata: str) -> None:
    commit_by_hand(topic, GROUP, offset, metadata)
    assert topic.committed(GROUP)[0] == (offset, metadata)


def run_member(topic: LogTopic) -> tuple[list[int], laneway.ConsumerStats]:
    handled: list[int] = []
    lock = threading.Lock()

    def handle(message: Message) -> None:
        with lock:
            handled.append(message.offset)

    consumer = laneway.Consumer(topic.source(GROUP), handle, engine="sync", handle_signals=False)
    stats = consumer.run(idle_timeout=2.0)
    return handled, stats


@pytest.mark.parametrize("source_kind", SOURCES)
def test_a_map_of_a_newer_release_falls_back_to_the_committed_offset(
    source_kind: str, make_topic: Callable[[str, int], LogTopic], caplog: pytest.LogCaptureFixture
) -> None:
    topic = make_topic(source_kind, 1)
    topic.produce([(b"k%d" % i, b"v%d" % i) for i in range(12)])
    commit_as_another_member(topic, 3, future_map(3, {5, 6, 7, 9, 10}))
    with caplog.at_level(logging.WARNING, logger="laneway.offsets.codec"):
        handled, stats = run_member(topic)
    assert handled == list(range(3, 12)), "a record after the committed offset was skipped"
    assert stats.skipped == 0
    [warning] = [r.getMessage() for r in caplog.records]
    assert "format version 3" in warning and "starts at its committed offset" in warning
    offset, metadata = topic.committed(GROUP)[0]
    assert (offset, metadata) == (12, "")


@pytest.mark.parametrize("source_kind", SOURCES)
def test_a_map_of_the_previous_release_keeps_its_finished_offsets(
    source_kind: str, make_topic: Callable[[str, int], LogTopic]
) -> None:
    topic = make_topic(source_kind, 1)
    topic.produce([(b"k%d" % i, b"v%d" % i) for i in range(10)])
    commit_as_another_member(topic, 3, encode(3, {5, 6}))  # version 1: no epochs
    assert decode_claims(encode(3, {5, 6}), 3)[1] is None
    handled, stats = run_member(topic)
    assert handled == [3, 4, 7, 8, 9]
    assert stats.skipped == 2
