"""librdkafka's share-consumer Preview warning: once per process, passed on by
``laneway run --members`` to its members, and never written into the process's own
environment (an application's other children still warn)."""

from __future__ import annotations

import logging
import os
import sys
from pathlib import Path

import pytest

from laneway.service.supervisor import Supervisor
from laneway.sources.share import preview_warning
from laneway.sources.share.preview_warning import PREVIEW_WARNED, _PreviewOnce

PREVIEW = 'CONFWARN [thrd:app]: The share consumer is in "Preview" and may change'


def line(text: str) -> logging.LogRecord:
    return logging.LogRecord("laneway.librdkafka", logging.WARNING, __file__, 1, text, (), None)


def test_the_warning_passes_once_and_leaves_the_environment_alone(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(PREVIEW_WARNED, raising=False)
    once = _PreviewOnce()
    assert once.filter(line(PREVIEW)) is True
    assert once.filter(line(PREVIEW)) is False
    assert once.filter(line("FAIL [thrd:b]: Connect to broker failed")) is True
    assert once.warned and PREVIEW_WARNED not in os.environ


def test_a_process_that_inherited_the_variable_does_not_warn(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(PREVIEW_WARNED, "1")
    assert _PreviewOnce().filter(line(PREVIEW)) is False


@pytest.mark.parametrize("warned", [True, False])
def test_the_supervisor_passes_the_variable_to_its_members_once_it_warned(
    warned: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(PREVIEW_WARNED, raising=False)
    monkeypatch.setattr(preview_warning._PREVIEW_ONCE, "warned", warned)
    seen = tmp_path / "seen"
    member = f"import os; open({str(seen)!r}, 'w').write(str(os.environ.get({PREVIEW_WARNED!r})))"
    supervisor = Supervisor([sys.executable, "-c", member], 1)
    supervisor._start(supervisor._members[0])
    process = supervisor._members[0].process
    assert process is not None and process.wait(timeout=30) == 0
    assert seen.read_text() == ("1" if warned else "None")
    assert PREVIEW_WARNED not in os.environ
