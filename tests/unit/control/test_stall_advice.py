"""The stall warning's advice fits the consumer: its engine and its handler_timeout."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from laneway.config import ConsumerConfig
from laneway.control.stalls import StallWatch, attempts_bound, stall_advice
from laneway.retry import RetryPolicy
from laneway.types import Message, Waiting

STUCK = Message("orders", 3, 17, b"stuck", b"v")
BEHIND = Waiting(messages=5, keys=2, names=(b"stuck", b"other"), partitions=(("orders", 3),))


class RunningEngine:
    """Just enough of an engine for the watch: one message running since t=0, with five
    messages of two keys waiting for it."""

    def running(self) -> list[tuple[Message, float]]:
        return [(STUCK, 0.0)]

    def waiting_behind(self, messages: list[Message]) -> list[Waiting]:
        assert messages == [STUCK]
        return [BEHIND]


def warning_for(caplog: pytest.LogCaptureFixture, **options: Any) -> str:
    config = ConsumerConfig.from_options({"stall_timeout": 5.0, **options})
    beyond = {("orders", 3): 40}
    watch = StallWatch.for_config(RunningEngine(), config, lambda: beyond)  # type: ignore[arg-type]
    with caplog.at_level(logging.WARNING, logger="laneway"):
        report = watch.look(now=6.0)
    [stall] = report.stalls
    assert (stall.offset, stall.waiting, stall.held_back) == (17, BEHIND, 40)
    assert report.waiting_by_partition == {("orders", 3): 5}
    [record] = [r for r in caplog.records if "longer than stall_timeout" in r.getMessage()]
    text = record.getMessage()
    assert "5 message(s) of 2 key(s) on orders[3] wait for it (for 6.0 s)" in text
    assert "with 40 finished message(s) beyond it" in text
    assert "other" not in text  # the waiting keys are counted, never named in a log line
    return text


@pytest.mark.parametrize("engine", ["sync", "thread"])
def test_threads_are_told_handler_timeout_is_refused_and_what_to_do_instead(
    engine: str, caplog: pytest.LogCaptureFixture
) -> None:
    text = warning_for(caplog, engine=engine)
    assert "orders[3]@17" in text and "stall_timeout=5 s" in text
    assert f"(engine={engine!r}), which cannot be interrupted" in text
    assert "handler_timeout is refused there" in text
    assert "bound the blocking call inside the handler" in text
    assert "engine='async' or 'process' with handler_timeout" in text
    where = "the control thread" if engine == "sync" else "a worker thread"
    assert where in text


@pytest.mark.parametrize(
    ("engine", "what"), [("async", "cancels the attempt"), ("process", "replaces the worker")]
)
def test_async_and_process_without_a_timeout_are_told_to_set_one(
    engine: str, what: str, caplog: pytest.LogCaptureFixture
) -> None:
    text = warning_for(caplog, engine=engine)
    assert f"Set handler_timeout: engine={engine!r} {what}" in text
    assert "refused" not in text


@pytest.mark.parametrize("engine", ["async", "process"])
def test_with_a_timeout_set_retries_that_outlast_stall_timeout_are_named(
    engine: str, caplog: pytest.LogCaptureFixture
) -> None:
    # 4 attempts of 2 s plus backoffs of 0.1 + 0.2 + 0.4 s: up to 8.7 s, above stall_timeout=5.
    text = warning_for(caplog, engine=engine, handler_timeout=2.0)
    assert "Set handler_timeout" not in text, "it is set already"
    assert "Each attempt is bounded by handler_timeout=2 s" in text
    assert "max_retries=3" in text and "up to 8.7 s" in text
    assert "raise stall_timeout above that, or lower max_retries" in text


def test_async_with_a_timeout_that_cannot_explain_the_stall_blocks_its_event_loop(
    caplog: pytest.LogCaptureFixture,
) -> None:
    text = warning_for(caplog, engine="async", handler_timeout=1.0, max_retries=0)
    assert "With handler_timeout=1 s set, the handler must be blocking the event loop" in text
    assert "asyncio.to_thread()" in text


def test_process_with_a_timeout_that_cannot_explain_the_stall_points_at_worker_restarts(
    caplog: pytest.LogCaptureFixture,
) -> None:
    text = warning_for(caplog, engine="process", handler_timeout=1.0, max_retries=0)
    assert "its worker should have been replaced already" in text
    assert "event loop" not in text


def test_the_bound_counts_every_attempt_and_the_longest_backoffs() -> None:
    assert attempts_bound(RetryPolicy(max_retries=3, backoff=0.1, backoff_max=5.0)) == 0.0
    policy = RetryPolicy(max_retries=3, backoff=1.0, backoff_max=1.5, timeout=2.0)
    assert attempts_bound(policy) == pytest.approx(4 * 2.0 + 1.0 + 1.5 + 1.5)


def test_the_advice_is_one_sentence_per_engine_without_the_old_blanket_text() -> None:
    texts = {
        engine: stall_advice(ConsumerConfig.from_options({"engine": engine}))
        for engine in ("sync", "thread", "async", "process")
    }
    assert len(set(texts.values())) == 4
    old = "A thread cannot be interrupted: use handler_timeout"
    assert not any(old in text for text in texts.values())
