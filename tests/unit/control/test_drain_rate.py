"""DrainRate: the completion rate the control plane uses to judge whether pausing pays off."""

from __future__ import annotations

import pytest

from laneway.control.drain_rate import WARM_UP, WINDOW, DrainRate


def test_no_rate_before_the_first_message_or_during_warm_up() -> None:
    rate = DrainRate()
    assert rate.per_second(100.0) is None
    rate.started(100.0)
    rate.finished(10, 100.0 + WARM_UP / 2)
    assert rate.per_second(100.0 + WARM_UP / 2) is None


def test_average_since_start_until_a_window_completes_then_the_latest_window() -> None:
    rate = DrainRate()
    rate.started(0.0)
    rate.finished(100, 0.01)
    assert rate.per_second(0.02) == pytest.approx(100 / 0.02)
    rate.finished(400, WINDOW)  # first window: 500 in WINDOW seconds
    assert rate.per_second(WINDOW) == pytest.approx(500 / WINDOW)
    rate.finished(10, 2 * WINDOW)  # the engine slowed down: 10 in the next window
    assert rate.per_second(2 * WINDOW) == pytest.approx(10 / WINDOW)


def test_a_stalled_engine_reports_zero() -> None:
    rate = DrainRate()
    rate.started(0.0)
    assert rate.per_second(0.01) == 0.0
