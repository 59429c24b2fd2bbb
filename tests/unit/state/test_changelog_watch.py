"""ChangelogWatch: changelog writes failing past the bound are said once, in one ERROR,
shown as not durable until a change of the partition is acknowledged again."""

from __future__ import annotations

import logging
import time

import pytest

from laneway.state.changelog_watch import ChangelogWatch


def test_failures_past_the_bound_are_one_error_until_acknowledged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    watch = ChangelogWatch("pay", "pay.state", after=0.2)
    with caplog.at_level(logging.INFO, logger="laneway.state"):
        watch.failed(0, "not acknowledged in 10 s")
        watch.failed(1, "UNKNOWN_TOPIC_OR_PART")
        assert watch.failing(0) and not watch.not_durable()  # a failure now and then: no more
        assert "ERROR" not in caplog.text
        time.sleep(0.25)
        watch.failed(0, "not acknowledged in 1 s")
        watch.failed(1, "UNKNOWN_TOPIC_OR_PART")
        [error] = [r for r in caplog.records if r.levelname == "ERROR"]
        assert "state of pay[0], pay[1] is not durable" in error.getMessage()
        assert "changelog pay.state" in error.getMessage()
        [first, second] = watch.not_durable()
        assert (first.partition, first.changelog, first.error) == (
            0,
            "pay.state",
            "not acknowledged in 1 s",
        )
        assert first.seconds >= 0.2 and second.partition == 1
        watch.reached([0])
        assert [n.partition for n in watch.not_durable()] == [1] and not watch.failing(0)
        assert "state of pay[0]: its changes reach the changelog pay.state again" in caplog.text
        watch.forget([1])
        assert watch.not_durable() == ()
        assert len([r for r in caplog.records if r.levelname == "ERROR"]) == 1
