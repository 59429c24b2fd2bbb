"""tune_gc: the youngest garbage-collector generation sized for the buffer while a consumer
runs, and put back after; thresholds somebody else chose are left alone."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

import laneway
from laneway.gc_tuning import MOST_OBJECTS, OBJECTS_PER_MESSAGE, sized_for, threshold_for
from laneway.types import Message


@pytest.fixture(autouse=True)
def default_thresholds() -> Iterator[tuple[int, int, int]]:
    """Every test starts from Python's default thresholds and leaves them as it found them."""
    before, enabled = gc.get_threshold(), gc.isenabled()
    gc.set_threshold(700, 10, 10)
    gc.enable()
    yield gc.get_threshold()
    gc.set_threshold(*before)
    if not enabled:
        gc.disable()


def test_the_threshold_follows_the_buffer_up_to_a_cap() -> None:
    assert threshold_for(10_000) == OBJECTS_PER_MESSAGE * 10_000
    assert threshold_for(10_000_000) == MOST_OBJECTS
    assert threshold_for(10) == OBJECTS_PER_MESSAGE * 10  # below the default: not lowered


def test_sizing_raises_the_youngest_generation_and_puts_it_back() -> None:
    with sized_for(10_000):
        assert gc.get_threshold() == (threshold_for(10_000), 10, 10)
    assert gc.get_threshold() == (700, 10, 10)


def test_a_threshold_already_higher_or_a_disabled_collector_is_left_alone() -> None:
    gc.set_threshold(500_000, 20, 20)
    with sized_for(10_000):
        assert gc.get_threshold() == (500_000, 20, 20)
    with sized_for(10):
        gc.set_threshold(700, 20, 20)  # changed while running: not undone
    assert gc.get_threshold() == (700, 20, 20)
    gc.disable()
    with sized_for(10_000):
        assert gc.get_threshold() == (700, 20, 20)


def test_overlapping_runs_put_the_thresholds_back_when_the_last_one_ends() -> None:
    first, second = sized_for(1_000), sized_for(10_000)
    first.__enter__()
    second.__enter__()
    assert gc.get_threshold()[0] == threshold_for(10_000)
    first.__exit__(None, None, None)
    assert gc.get_threshold()[0] == threshold_for(10_000)  # the second still runs
    second.__exit__(None, None, None)
    assert gc.get_threshold() == (700, 10, 10)


def test_the_default_is_not_touched_after_someone_else_changed_it() -> None:
    with sized_for(10_000):
        gc.set_threshold(50_000, 5, 5)
    assert gc.get_threshold() == (50_000, 5, 5)


@pytest.mark.parametrize("tune", [True, False])
def test_a_consumer_runs_with_the_sized_collector_and_puts_it_back(tune: bool) -> None:
    log = laneway.EmbeddedLog()
    log.create_topic("t", partitions=2)
    for i in range(50):
        log.produce("t", value=b"v", key=str(i).encode())
    seen: list[int] = []

    def handle(message: Message) -> None:
        seen.append(gc.get_threshold()[0])

    stats = laneway.Consumer(
        log.subscribe(["t"], group="g"),
        handle,
        engine="sync",
        max_buffered=2_000,
        tune_gc=tune,
        handle_signals=False,
    ).run(max_messages=50)
    assert stats.processed == 50
    assert set(seen) == ({threshold_for(2_000)} if tune else {700})
    assert gc.get_threshold() == (700, 10, 10)


def test_tune_gc_takes_a_flag_only() -> None:
    log = laneway.EmbeddedLog()
    log.create_topic("t")
    with pytest.raises(laneway.ConfigError, match="tune_gc"):
        laneway.Consumer(log.subscribe(["t"], group="g"), lambda m: None, tune_gc="yes")  # type: ignore[arg-type]
