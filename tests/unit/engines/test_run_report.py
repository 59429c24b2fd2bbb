"""RunReport's hand-over: what a worker finished before a call that does not return is
reported by the watcher, each message exactly once, with its handler time."""

from __future__ import annotations

import threading
import types

import pytest

from laneway.engines import run_report
from laneway.engines.base import Completions, InFlight
from laneway.engines.run_report import REPORT_EVERY, RunReport, hand_over_slow
from laneway.types import Message


def messages(count: int) -> list[Message]:
    return [Message("t", 0, i, b"k%d" % (i % 7), b"") for i in range(count)]


def test_what_a_worker_finished_before_a_long_call_is_handed_over_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    clock = types.SimpleNamespace(monotonic=lambda: 100.0)  # the worker's clock stands still
    monkeypatch.setattr(run_report, "time", clock)
    completions, slot = Completions(), InFlight()
    report = RunReport(completions, slot, timed=True)
    batch = messages(3)
    for message in batch:
        report.start(message)
        report.done.append(message)
    slow = Message("t", 0, 3, b"slow", b"")
    report.start(slow)  # the worker is inside this call now
    assert hand_over_slow([slot], slot.since + REPORT_EVERY / 2) == 0, "not long enough yet"
    assert hand_over_slow([slot], slot.since + 2 * REPORT_EVERY) == 3
    assert report.hand_over() == 0, "nothing new"
    done, failed = completions.take()
    assert done == batch and not failed
    report.done.append(slow)  # the call returned
    report.end()
    assert completions.take() == ([slow], [])
    assert slot.report is None and hand_over_slow([slot], slot.since + 60) == 0


def test_hand_overs_racing_a_busy_worker_report_every_message_once_in_order() -> None:
    completions, slot = Completions(), InFlight()
    batch = messages(20_000)
    stop = threading.Event()

    def watcher() -> None:
        while not stop.is_set():
            report = slot.report
            if report is not None:
                report.hand_over()

    looking = threading.Thread(target=watcher)
    looking.start()
    try:
        report = RunReport(completions, slot, timed=True)
        for message in batch:
            report.start(message)
            report.done.append(message)
        report.end()
    finally:
        stop.set()
        looking.join()
    reported: list[Message] = []
    durations = 0
    while True:
        done = completions.take_all()
        if not done.finished:
            break
        reported += done.finished
        durations += len(done.durations)
    assert reported == batch
    assert durations == len(batch)
