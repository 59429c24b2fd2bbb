"""laneway.logs: every laneway logger holds back repeated identical warnings and counts them."""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

import laneway
from laneway import logs
from laneway.logs import REPEATS, RepeatFilter, get_logger


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    fake = Clock()
    monkeypatch.setattr(logs.time, "monotonic", fake)
    return fake


class Lines:
    """The records logged by the test so far (caplog's, for the call phase)."""

    def __init__(self, caplog: pytest.LogCaptureFixture) -> None:
        self._caplog = caplog

    def __len__(self) -> int:
        return len(self._caplog.records)

    def __iter__(self) -> Iterator[logging.LogRecord]:
        return iter(self._caplog.records)

    def __getitem__(self, index: int) -> logging.LogRecord:
        return self._caplog.records[index]


@pytest.fixture
def lines(caplog: pytest.LogCaptureFixture) -> Iterator[Lines]:
    with caplog.at_level(logging.DEBUG, logger="laneway"):
        yield Lines(caplog)


def test_a_flood_of_one_warning_is_one_line_then_a_count(clock: Clock, lines: Lines) -> None:
    log = get_logger("laneway.test.flood")
    for _ in range(4_212):
        log.warning("write to %s failed: %s", "results", "TOPIC_AUTHORIZATION_FAILED")
    assert [r.getMessage() for r in lines] == [
        "write to results failed: TOPIC_AUTHORIZATION_FAILED"
    ]
    clock.now += logs.REPEAT_WINDOW
    log.warning("write to %s failed: %s", "results", "TOPIC_AUTHORIZATION_FAILED")
    assert lines[-1].getMessage() == (
        "write to results failed: TOPIC_AUTHORIZATION_FAILED "
        "(repeated 4,211 times in the last 30 s)"
    )
    clock.now += 1.0
    log.warning("write to %s failed: %s", "results", "TOPIC_AUTHORIZATION_FAILED")
    assert len(lines) == 2


def test_lines_differ_by_text_level_and_logger(clock: Clock, lines: Lines) -> None:
    first, second = get_logger("laneway.test.one"), get_logger("laneway.test.two")
    for _ in range(3):
        first.warning("same")
        first.error("same")
        first.warning("other")
        second.warning("same")
    assert [(r.name, r.levelname, r.getMessage()) for r in lines] == [
        ("laneway.test.one", "WARNING", "same"),
        ("laneway.test.one", "ERROR", "same"),
        ("laneway.test.one", "WARNING", "other"),
        ("laneway.test.two", "WARNING", "same"),
    ]


def test_info_and_debug_lines_always_pass(clock: Clock, lines: Lines) -> None:
    log = get_logger("laneway.test.info")
    for _ in range(3):
        log.info("assigned %s", "[('t', 0)]")
        log.debug("polled")
    assert len(lines) == 6


def test_a_filter_for_every_level_holds_back_info_lines_too(clock: Clock, lines: Lines) -> None:
    log = get_logger("laneway.test.every", every_level=True)
    for _ in range(3):
        log.info("librdkafka says so")
    assert len(lines) == 1


def test_forget_repeats_lets_the_next_line_through_whole(clock: Clock, lines: Lines) -> None:
    log = get_logger("laneway.test.forget")
    log.warning("again")
    log.warning("again")
    logs.forget_repeats()
    log.warning("again")
    assert [r.getMessage() for r in lines] == ["again", "again"]


def test_memory_stays_bounded_under_many_distinct_lines(clock: Clock) -> None:
    repeats = RepeatFilter()
    for n in range(5 * logs.MAX_REMEMBERED):
        record = logging.LogRecord("laneway.x", logging.WARNING, __file__, 1, f"line {n}", (), None)
        assert repeats.filter(record)
    assert len(repeats._seen) <= logs.MAX_REMEMBERED + 1


def test_get_logger_attaches_the_filter_once() -> None:
    log = get_logger("laneway.test.once")
    assert get_logger("laneway.test.once") is log
    assert log.filters.count(REPEATS) == 1


def test_every_laneway_module_gets_its_logger_from_get_logger() -> None:
    package = Path(laneway.__file__).parent
    plain = re.compile(r"logging\.getLogger\(\s*[\"_a-z]")  # a named logger, not the root
    offenders = [
        str(path.relative_to(package))
        for path in package.rglob("*.py")
        if path != package / "logs.py" and plain.search(path.read_text())
    ]
    assert offenders == [], "use laneway.logs.get_logger, so repeats are held back"
