"""close_within: a close that blocks cannot hold a stopping member (pure logic, no broker;
the real group and share consumers frozen mid-close are in tests/chaos/test_chaos_broker.py)."""

from __future__ import annotations

import threading
import time

import pytest

from laneway.sources.kafka.bounded_close import close_within


def test_a_close_that_returns_in_time_is_reported_done() -> None:
    closed: list[str] = []
    assert close_within(lambda: closed.append(threading.current_thread().name), 5.0, "closer")
    assert closed == ["closer"], "the close ran once, on its own named thread"


def test_a_close_that_blocks_is_left_behind_after_its_bound() -> None:
    release = threading.Event()
    started = time.monotonic()
    try:
        assert not close_within(release.wait, 0.2, "stuck-close")
        waited = time.monotonic() - started
        assert 0.2 <= waited < 5.0
        [stuck] = [t for t in threading.enumerate() if t.name == "stuck-close"]
        assert stuck.daemon, "a left-behind close must not keep the process alive"
    finally:
        release.set()


def test_the_error_of_a_close_is_raised_to_the_caller() -> None:
    def close() -> None:
        raise RuntimeError("broker said no")

    with pytest.raises(RuntimeError, match="broker said no"):
        close_within(close, 5.0, "failing-close")
