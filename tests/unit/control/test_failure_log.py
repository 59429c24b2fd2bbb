"""FailureLog: failures one line each, then a summary per window under a flood."""

from __future__ import annotations

import logging

import pytest

from laneway.control.dead_letters.failure_log import FailureLog
from laneway.types import Failure, Message


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def failure(offset: int, kind: str = "ValueError") -> Failure:
    return Failure(Message("orders", 0, offset, b"k", b"v"), kind, "bad", 1, "Traceback...")


def test_a_flood_becomes_one_summary_line_per_window(caplog: pytest.LogCaptureFixture) -> None:
    clock = Clock()
    failures = FailureLog(burst=3, window=60.0, clock=clock)
    with caplog.at_level(logging.ERROR, logger="laneway"):
        for offset in range(1_000):
            failures.failed(
                failure(offset, "KeyError" if offset % 10 == 0 else "ValueError"), "dlq"
            )
        assert len(caplog.records) == 3
        assert "Traceback..." in caplog.records[0].getMessage()
        clock.now += 30
        failures.tick()
        assert len(caplog.records) == 3, "no summary before the window ends"
        clock.now += 31
        failures.tick()
    assert len(caplog.records) == 4
    summary = caplog.records[3].getMessage()
    assert summary.startswith("997 more messages failed in the last 61 s")
    assert "orders: ValueError 898 (dlq)" in summary and "orders: KeyError 99 (dlq)" in summary


def test_a_new_window_logs_one_by_one_again(caplog: pytest.LogCaptureFixture) -> None:
    clock = Clock()
    failures = FailureLog(burst=2, window=10.0, clock=clock)
    with caplog.at_level(logging.ERROR, logger="laneway"):
        for offset in range(5):
            failures.failed(failure(offset), "dlq")
        clock.now += 11
        failures.failed(failure(5), "dlq")
        failures.flush()
    messages = [r.getMessage() for r in caplog.records]
    assert len(messages) == 4
    assert messages[2].startswith("3 more messages failed")
    assert "@5 (key b'k')" in messages[3]
