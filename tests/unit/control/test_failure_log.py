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


def test_records_that_did_not_decode_leave_the_handlers_failures_their_lines(
    caplog: pytest.LogCaptureFixture,
) -> None:
    failures = FailureLog(burst=3, window=60.0, clock=Clock())
    undecoded = [
        Failure(Message("orders", 0, offset, b"bad", b"{x"), "deserialization",
                "could not decode the value: DecodeError: JSON is malformed", 0)
        for offset in range(20)
    ]  # fmt: skip
    with caplog.at_level(logging.ERROR, logger="laneway"):
        for each in undecoded:
            failures.failed(each, "dead-lettered to orders.dlq")
        failures.failed(failure(20), "dead-lettered to orders.dlq")
        failures.flush()
    messages = [r.getMessage() for r in caplog.records]
    assert len(messages) == 5  # 3 undecoded, the handler's failure, the summary
    assert messages[0] == (
        "record orders[0]@0 (key b'bad') did not decode; the handler was not called: could "
        "not decode the value: DecodeError: JSON is malformed; dead-lettered to orders.dlq"
    )
    assert not [m for m in messages if "after 0 attempt(s)" in m]
    assert messages[3].startswith("handler failed on orders[0]@20 (key b'k') after 1 attempt")
    assert messages[4].startswith("17 more messages failed")
