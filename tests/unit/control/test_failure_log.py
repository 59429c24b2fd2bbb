"""FailureLog: failures one line each, then a summary per window under a flood."""

from __future__ import annotations

import logging

import pytest

from laneway.control.dead_letters.failure_log import FailureLog
from laneway.stats import ERROR_TEXT_KEPT, FAILURES_KEPT
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


def test_the_latest_failures_are_kept_without_key_or_value() -> None:
    failures = FailureLog(burst=0)
    trace = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
    secret = Message("orders", 2, 7, b"acct-1", b"card=4111", [("traceparent", trace.encode())])
    failures.failed(Failure(secret, "ValueError", "x" * 2_000, 4), "dead-lettered to orders.dlq")
    [note] = failures.recent
    assert (note.topic, note.partition, note.offset, note.attempts) == ("orders", 2, 7, 4)
    assert note.trace_id == "4bf92f3577b34da6a3ce929d0e0e4736"
    assert note.outcome == "dead-lettered to orders.dlq"
    assert len(note.error_message) == ERROR_TEXT_KEPT
    assert b"acct-1" not in repr(note).encode() and b"4111" not in repr(note).encode()
    for offset in range(100):
        failures.failed(failure(offset), "dlq")
    assert len(failures.recent) == FAILURES_KEPT
    assert [n.offset for n in failures.recent] == list(range(100 - FAILURES_KEPT, 100))
    assert failures.recent[-1].trace_id is None


ZERO_TRACE = b"00-" + b"0" * 32 + b"-00f067aa0ba902b7-01"


@pytest.mark.parametrize("value", [b"garbage", ZERO_TRACE, b"00-xyz-1-01"])
def test_a_malformed_traceparent_gives_no_trace_id(value: bytes) -> None:
    failures = FailureLog(burst=0)
    message = Message("orders", 0, 1, None, b"v", [("traceparent", value)])
    failures.failed(Failure(message, "ValueError", "bad", 1), "dlq")
    assert failures.recent[-1].trace_id is None
