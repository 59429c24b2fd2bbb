"""A shutdown runs every step whatever the ones before raised, then raises the first error
(a refusal for good before any other): a step skipped after a failure once left a fenced
exactly-once member in its group and its process workers alive."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from laneway.control.stopping import ShutdownSteps
from laneway.errors import AccessDeniedError, SourceError, TransactionError


def raising(error: Exception) -> Callable[[], None]:
    def step() -> None:
        raise error

    return step


def test_every_step_runs_and_the_first_error_is_raised() -> None:
    ran: list[str] = []
    steps = ShutdownSteps(lambda denial: None)

    def fail(error: Exception, name: str) -> None:
        ran.append(name)
        raise error

    steps.run("final commit", lambda: fail(TransactionError("fenced"), "commit"))
    steps.run("closing the source", lambda: fail(SourceError("close failed"), "source"))
    steps.run("closing the engine", lambda: ran.append("engine"))
    assert ran == ["commit", "source", "engine"]
    with pytest.raises(TransactionError, match="fenced"):
        steps.raise_first(None)


def test_a_refusal_is_kept_apart_and_raised_before_other_errors() -> None:
    refused: list[AccessDeniedError] = []
    steps = ShutdownSteps(refused.append)
    denial = AccessDeniedError("no WRITE on topic out")
    steps.run("closing results", raising(denial))
    steps.run("closing the source", raising(SourceError("close failed")))
    assert refused == [denial]
    assert len(steps.failures) == 1
    with pytest.raises(AccessDeniedError):
        steps.raise_first(refused[0])


def test_nothing_is_raised_when_every_step_succeeded() -> None:
    steps = ShutdownSteps(lambda denial: None)
    steps.run("closing the engine", lambda: None)
    steps.raise_first(None)
    assert steps.failures == []
