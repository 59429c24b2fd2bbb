"""Kafka's rule for topic names, checked once for every source, and the "did you mean"
of an unknown topic.

Kafka accepts a topic name of 1 to 249 characters from ``[a-zA-Z0-9._-]`` that is not
``.`` or ``..`` (the broker refuses anything else, and a client only learns so as an
unknown-topic error). The Kafka sources, the share-group source and the embedded log check
names with :func:`check_topic_name` when they are made, so a typo such as ``"bad topic!"``
or ``LANEWAY_TOPICS="a b"`` (a space, where several topics are separated by commas) is a
:class:`~laneway.errors.ConfigError` naming the name and the rule.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable

from laneway.errors import ConfigError

MAX_LENGTH = 249
"""The longest topic name Kafka accepts."""

RULE = (
    f"Kafka allows 1-{MAX_LENGTH} characters of ASCII letters, digits, '.', '_' and '-' "
    "(not '.' or '..')"
)
"""Kafka's rule, as error messages state it."""

_LEGAL = re.compile(r"[a-zA-Z0-9._-]+")


def check_topic_name(name: object, option: str = "topic") -> str:
    """``name`` if it is a legal Kafka topic name, else a ConfigError naming the name, the
    ``option`` it was given as, what is wrong and the rule (and, for a name with spaces or
    commas, how to give several topics)."""
    if not isinstance(name, str):
        raise ConfigError(f"{option} contains {name!r}; a topic name is a string")
    if _LEGAL.fullmatch(name) and len(name) <= MAX_LENGTH and name not in (".", ".."):
        return name
    hint = ""
    if any(c.isspace() or c == "," for c in name):
        hint = (
            "; several topics are several names (a list; for laneway run, repeat --topic "
            "or separate them with commas)"
        )
    raise ConfigError(
        f"topic name {name!r} is not valid ({option}): {_problem(name)}; {RULE}{hint}"
    )


def check_topic_names(
    topics: object, option: str = "topics", *, patterns: bool = False
) -> tuple[str, ...]:
    """The distinct names of ``topics`` (a list or tuple of names, in order), each checked
    by :func:`check_topic_name`; a ConfigError unless it lists at least one. With
    ``patterns``, a name starting with ``^`` is a regular-expression subscription
    (librdkafka's) and is passed on unchecked."""
    if isinstance(topics, (str, bytes)) or not isinstance(topics, Iterable):
        raise ConfigError(
            f"{option}={topics!r} is not valid; expected a list of topic names, e.g. ['orders']"
        )
    names: list[str] = []
    for topic in topics:
        if not (patterns and isinstance(topic, str) and topic.startswith("^")):
            check_topic_name(topic, option)
        if topic not in names:
            names.append(topic)
    if not names:
        raise ConfigError(f"{option}=[] is not valid; expected at least one topic name")
    return tuple(names)


def unknown_topics(missing: Iterable[str], known: Iterable[str]) -> str:
    """``unknown topic 'x'`` for the ``missing`` names, each with the ``known`` topic it
    most likely misspells (``'x' (did you mean 'y'?)``)."""
    candidates = [name for name in known if not name.startswith("__")]  # not internal ones
    shown = []
    for name in missing:
        close = difflib.get_close_matches(name, candidates, n=1, cutoff=0.75)
        shown.append(f"{name!r} (did you mean {close[0]!r}?)" if close else repr(name))
    return f"unknown topic {', '.join(shown)}"


def _problem(name: str) -> str:
    if not name:
        return "it is empty"
    if name in (".", ".."):
        return f"{name!r} is reserved"
    if len(name) > MAX_LENGTH:
        return f"it is {len(name)} characters long"
    illegal = sorted({c for c in name if not _LEGAL.fullmatch(c)})
    return "it contains " + ", ".join(repr(c) for c in illegal)
