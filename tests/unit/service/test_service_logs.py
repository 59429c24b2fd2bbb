"""The start-up hold: a start that fails shows only its one-line error; one that succeeds
shows everything it logged, in order."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest

from laneway.service import logs


@pytest.fixture(autouse=True)
def restore_logging() -> Iterator[None]:
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)


def test_a_failed_start_drops_what_it_logged(capsys: pytest.CaptureFixture[str]) -> None:
    logs.configure("info", "text")
    logging.getLogger("laneway.kafka").warning("Connect to ipv4#127.0.0.1:1 failed")
    logging.getLogger("laneway.service.member").info("consuming kafka:127.0.0.1:1/g")
    logs.start_failed()
    assert capsys.readouterr().err == ""
    logging.getLogger("laneway.service").warning("after the start")
    assert "after the start" in capsys.readouterr().err


def test_a_start_that_succeeds_writes_what_it_logged_in_order(
    capsys: pytest.CaptureFixture[str],
) -> None:
    logs.configure("info", "json", member=1)
    logging.getLogger("laneway.service.member").info("first")
    logging.getLogger("laneway.librdkafka").warning("second")
    assert capsys.readouterr().err == ""
    logs.started()
    logging.getLogger("laneway.kafka").info("third")
    lines = capsys.readouterr().err.splitlines()
    assert [line.split('"message": "')[1].split('"')[0] for line in lines] == [
        "first",
        "second",
        "third",
    ]
    assert all('"member": 1' in line for line in lines)
    logs.start_failed()
    logging.getLogger("laneway.kafka").info("fourth")
    assert "fourth" in capsys.readouterr().err, "an error after the start drops nothing"


def test_at_debug_level_nothing_is_held(capsys: pytest.CaptureFixture[str]) -> None:
    logs.configure("debug", "text")
    logging.getLogger("laneway.librdkafka").debug("CONNECT 127.0.0.1:1")
    assert "CONNECT 127.0.0.1:1" in capsys.readouterr().err


def test_secret_values_are_scrubbed_from_lines_and_tracebacks(
    capsys: pytest.CaptureFixture[str],
) -> None:
    logs.configure("info", "text", secrets=["oauth-s3cret", "hunter22"])
    logs.started()
    text = "Unrecognized sasl.oauthbearer.config beginning at: bogus=%s"
    logging.getLogger("laneway.kafka").warning(text, "oauth-s3cret")
    try:
        raise ValueError("login hunter22 refused")
    except ValueError:
        logging.getLogger("laneway.service").exception("failed")
    err = capsys.readouterr().err
    assert "beginning at: bogus=***" in err and "ValueError: login *** refused" in err
    assert "s3cret" not in err and "hunter22" not in err
    assert logs.scrubbed("cause: bogus=oauth-s3cret") == "cause: bogus=***"


def test_a_handlers_own_lines_are_not_held_and_a_long_start_is_shown(
    capsys: pytest.CaptureFixture[str],
) -> None:
    logs.configure("info", "text")
    logging.getLogger("myapp.db").warning("database not up yet; retrying")
    assert "database not up yet" in capsys.readouterr().err, "a handler's open() is seen"
    for n in range(logs.MOST_HELD):
        logging.getLogger("laneway.kafka").warning("refused %d", n)
    assert capsys.readouterr().err == ""
    logging.getLogger("laneway.kafka").warning("refused again")
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == logs.MOST_HELD + 1 and lines[-1].endswith("refused again")
    assert lines[0].endswith("refused 0"), "in order"


def test_a_line_that_is_not_held_comes_after_the_held_ones_before_it(
    capsys: pytest.CaptureFixture[str],
) -> None:
    logs.configure("info", "text")
    logging.getLogger("laneway.service.health_server").info("health probes on port 8080")
    logging.getLogger("laneway.service.member").info("consuming kafka:b/g")
    logging.getLogger("laneway.control.plane").info("assigned [('orders', 0)]")
    lines = capsys.readouterr().err.splitlines()
    assert [line.split(": ", 1)[1] for line in lines] == [
        "health probes on port 8080",
        "consuming kafka:b/g",
        "assigned [('orders', 0)]",
    ]
    logging.getLogger("laneway.kafka").warning("still held after it")
    assert capsys.readouterr().err == ""
    logs.started()
    assert "still held after it" in capsys.readouterr().err
