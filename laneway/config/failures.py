"""The options that say what happens when a handler fails or hangs."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TypedDict

from laneway.errors import ConfigError
from laneway.options import (
    OptionSpec,
    StallAction,
    StallActionName,
    choice_of,
    duration,
    names,
    number,
    option,
)
from laneway.types import Failure, Message

FailureCallback = Callable[[Message, Failure], object]
"""``on_failure(message, failure)``: called after a message's last failed attempt."""


def _callable_or_none(value: object, name: str) -> object:
    if value is not None and not callable(value):
        raise ConfigError(
            f"{name}={value!r} is not valid; expected a callable (message, failure) or None"
        )
    return value


def _dead_letter_topic(value: object, name: str) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not value or value.count("{") != value.count("}"):
        raise ConfigError(
            f"{name}={value!r} is not valid; expected a topic name, optionally with {{topic}} "
            "for the source topic (default '{topic}.dlq'), or None"
        )
    try:
        value.format(topic="t")
    except (KeyError, IndexError, ValueError):
        raise ConfigError(
            f"{name}={value!r} is not valid; the only placeholder is {{topic}}"
        ) from None
    return value


@dataclass(frozen=True)
class FailureOptions:
    """Stalls, retries, dead letters and poison keys (part of :class:`ConsumerConfig`)."""

    stall_timeout: float = option(
        60.0,
        OptionSpec(
            "seconds a message may be in its handler before it counts as stalled: logged "
            "as a WARNING naming it and shown in stats()",
            duration(),
            "seconds",
            "above the slowest legitimate handler call, retries included",
        ),
    )
    on_stall: StallAction = option(
        StallAction.WARN,
        OptionSpec(
            "what a stall does: warn (log it, report it in stats() and /readyz) or exit "
            "(also end the process with exit code 4, so an orchestrator restarts it)",
            choice_of(StallAction),
            "choice",
            "exit when a stuck handler cannot recover by itself and a restart is cheap",
            choices=names(StallAction),
        ),
    )
    max_retries: int = option(
        3,
        OptionSpec(
            "retries of a failing handler (0: run once), holding its lane",
            number(minimum=0),
            "int",
            "retries hold the key's lane; keep max_retries x retry_backoff_max well under "
            "drain_timeout",
        ),
    )
    retry_backoff: float = option(
        0.1,
        OptionSpec(
            "first retry delay in seconds; doubles per retry, jittered (50-100%)",
            duration(allow_zero=True),
            "seconds",
        ),
    )
    retry_backoff_max: float = option(
        5.0,
        OptionSpec("longest retry delay in seconds", duration(allow_zero=True), "seconds"),
    )
    handler_timeout: float | None = option(
        None,
        OptionSpec(
            "seconds one attempt may take: async cancels it, process replaces the worker",
            duration(nullable=True),
            "seconds",
            "threads cannot be interrupted, so sync and thread engines refuse it",
            nullable=True,
        ),
    )
    dead_letter_topic: str | None = option(
        "{topic}.dlq",
        OptionSpec(
            "where messages go after their last attempt ({topic} is replaced); none: log only",
            _dead_letter_topic,
            "text",
            "created on first use with the source topic's partition count",
            nullable=True,
        ),
    )
    on_failure: FailureCallback | None = option(
        None,
        OptionSpec(
            "called with (message, failure) after the last attempt, instead of dead letters",
            _callable_or_none,
            "object",
            "if it raises it is retried with the retry backoff; the offset waits for it",
        ),
    )
    poison_threshold: int | None = option(
        None,
        OptionSpec(
            "final failures of one key that open its circuit: its next messages go straight "
            "to dead letters for poison_cooldown",
            number(nullable=True),
            "int",
            "low values isolate poison keys fast but also dead-letter a key's healthy "
            "messages during a passing outage",
            nullable=True,
        ),
    )
    poison_cooldown: float = option(
        30.0,
        OptionSpec(
            "seconds a key's circuit stays open",
            duration(),
            "seconds",
            "about as long as the outages you expect",
        ),
    )


class FailureKeywords(TypedDict, total=False):
    """The keywords of :class:`FailureOptions`, typed."""

    stall_timeout: float
    on_stall: StallActionName | StallAction
    max_retries: int
    retry_backoff: float
    retry_backoff_max: float
    handler_timeout: float | None
    dead_letter_topic: str | None
    on_failure: FailureCallback | None
    poison_threshold: int | None
    poison_cooldown: float
