"""The options that keep a skewed key space fair: a hot key's buffer cap, keyless messages,
tenants served in turn, and urgent work first (see :mod:`laneway.control.skew`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypedDict

from laneway.errors import ConfigError
from laneway.fairness import Fairness
from laneway.options import NullKeys, NullKeysName, OptionSpec, choice_of, names, number, option
from laneway.serde.names import load
from laneway.types import Message

PER_KEY_SHARE = 16
"""``max_buffered_per_key`` when not given: ``max_buffered`` divided by this."""

Priority = Callable[[Message], int]
"""``priority(message)``: higher starts first among ready keys."""


def _fairness(value: object, name: str) -> Fairness | None:
    if isinstance(value, str):
        value = load(value, name) if value else None
    if value is not None and not isinstance(value, Fairness):
        raise ConfigError(
            f"{name}={value!r:.60} is not valid; expected a laneway.Fairness(group_by=...) "
            "or MODULE:ATTR naming one"
        )
    return value


def _priority(value: object, name: str) -> Priority | None:
    if isinstance(value, str):
        value = load(value, name) if value else None
    if value is not None and not callable(value):
        raise ConfigError(
            f"{name}={value!r:.60} is not valid; expected a callable (message) -> int, or "
            "MODULE:ATTR naming one"
        )
    return value


@dataclass(frozen=True)
class FairnessOptions:
    """How a skewed key space shares the buffer and the handlers (part of
    :class:`ConsumerConfig`)."""

    max_buffered_per_key: int | None = option(
        None,
        OptionSpec(
            "most fetched-but-unfinished messages of one key (ordering=key); a hot key's "
            "later messages are not kept but read again once it catches up (their offsets "
            "stay uncommitted), so its backlog cannot fill max_buffered for the other keys",
            number(nullable=True),
            "int",
            "a key runs one message at a time, so a few hundred keep it busy; lower it when a "
            "handful of hot keys share a small max_buffered (thread, async and process "
            "engines; the sync engine holds nothing back)",
            nullable=True,
            shown_default=f"max_buffered / {PER_KEY_SHARE}",
        ),
    )
    null_keys: NullKeys = option(
        NullKeys.PARTITION,
        OptionSpec(
            "how keyless messages are ordered under ordering=key: partition (one lane per "
            "partition, in order) or unordered (each on its own, in parallel)",
            choice_of(NullKeys),
            "choice",
            "unordered for independent keyless events; keyed messages keep key order",
            choices=names(NullKeys),
        ),
    )
    fairness: Fairness | None = option(
        None,
        OptionSpec(
            "serve groups of messages (tenants) weighted round robin, each within its "
            "max_in_flight and max_rate: a laneway.Fairness (laneway run: MODULE:ATTR)",
            _fairness,
            "text",
            "cap a group's in-flight messages below concurrency so a flooding tenant leaves "
            "handlers for the others; see the skewed-keys guide",
            nullable=True,
        ),
    )
    priority: Priority | None = option(
        None,
        OptionSpec(
            "priority(message) -> int: among ready keys the higher starts first, never "
            "reordering a key; a waiting message is served within a few seconds whatever "
            "its priority (laneway run: MODULE:ATTR)",
            _priority,
            "text",
            "keep it cheap (it runs once per message on the control thread)",
            nullable=True,
        ),
    )


class FairnessKeywords(TypedDict, total=False):
    """The keywords of :class:`FairnessOptions`, typed."""

    max_buffered_per_key: int | None
    null_keys: NullKeysName | NullKeys
    fairness: Fairness | None
    priority: Callable[[Message], Any] | None
