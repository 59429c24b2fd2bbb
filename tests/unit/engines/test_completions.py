"""Completions: the mailbox from engines to the control thread, and how it wakes it."""

from __future__ import annotations

import threading
import time

from laneway.engines.base import Completions
from laneway.types import Message


def messages(count: int, first: int = 0) -> list[Message]:
    return [Message("t", 0, first + i, b"k", b"") for i in range(count)]


def later(seconds: float, action: object) -> threading.Thread:
    def run() -> None:
        time.sleep(seconds)
        action()  # type: ignore[operator]

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def test_a_wait_for_a_batch_sleeps_through_smaller_reports() -> None:
    completions = Completions()
    completions.report(messages(1), [])
    later(0.3, lambda: completions.report(messages(2, first=1), []))
    started = time.monotonic()
    assert completions.wait(5.0, at_least=3)
    assert time.monotonic() - started >= 0.25  # the first report alone did not wake it
    finished, failed = completions.take()
    assert [m.offset for m in finished] == [0, 1, 2] and failed == []


def test_a_wait_returns_at_once_when_enough_is_already_reported() -> None:
    completions = Completions()
    completions.report(messages(4), [])
    started = time.monotonic()
    assert completions.wait(5.0, at_least=4)
    assert time.monotonic() - started < 1.0


def test_wake_cuts_a_batch_wait_short_and_the_next_wait_takes_any_report() -> None:
    completions = Completions()
    later(0.1, completions.wake)
    started = time.monotonic()
    assert completions.wait(5.0, at_least=1_000)
    assert time.monotonic() - started < 2.0
    completions.take()
    later(0.1, lambda: completions.report(messages(1), []))
    started = time.monotonic()
    assert completions.wait(5.0)  # back to waking on the first report
    assert time.monotonic() - started < 2.0


def test_nothing_reported_means_the_wait_times_out() -> None:
    completions = Completions()
    assert not completions.wait(0.05, at_least=2)


def test_take_all_names_each_part_of_what_was_reported_and_empties_the_mailbox() -> None:
    completions = Completions()
    returned = messages(1, first=9)
    completions.report(messages(2), [], durations=[0.5, 0.25], retries={"t": 2})
    completions.report([], [], retries={"t": 1}, results=[(returned, [])])
    taken = completions.take_all()
    assert [m.offset for m in taken.finished] == [0, 1]
    assert taken.failed == [] and taken.durations == [0.5, 0.25]
    assert taken.retries == {"t": 3}
    assert [[m.offset for m in group] for group, _ in taken.results] == [[9]]
    again = completions.take_all()
    assert (again.finished, again.durations, again.retries, again.results) == ([], [], {}, [])
