"""Which dead letters a ``laneway dlq`` command works on: ``--where``, ``--since``, ``--until``.

``--where`` clauses: ``type=NAME`` (the error type, exactly), ``topic=NAME`` (the original
topic) and ``message~TEXT`` (the error message contains TEXT). Clauses on the same field
are alternatives, clauses on different fields must all hold. ``--since`` / ``--until``
bound the dead-letter record's timestamp (when it was dead-lettered): an ISO 8601 time
(UTC unless it says otherwise, e.g. ``2026-11-25T14:00:00Z``) or an age such as ``90s``,
``30m``, ``2h``, ``1d`` (that long ago).
"""

from __future__ import annotations

import hashlib
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timezone

from laneway.errors import ConfigError
from laneway.ops.dlq.records import DeadLetter

_AGE = re.compile(r"([0-9]+(?:\.[0-9]+)?)([smhd])")
_UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
_WHERE_FORMS = "type=NAME, topic=NAME or message~TEXT"


def parse_time(text: str, option: str, now: float | None = None) -> int:
    """``text`` (ISO 8601, or an age like ``2h``) as epoch milliseconds; a ConfigError
    naming ``option`` otherwise."""
    now = time.time() if now is None else now
    value = text.strip()
    age = _AGE.fullmatch(value)
    if age:
        return int((now - float(age.group(1)) * _UNIT_SECONDS[age.group(2)]) * 1000)
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        raise ConfigError(
            f"{option} {text!r} is not valid; expected an ISO 8601 time such as "
            "2026-11-25T14:00:00Z (UTC unless it says otherwise) or an age such as 30m, 2h, 1d"
        ) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    return int(moment.timestamp() * 1000)


def format_time(ms: int) -> str:
    """Epoch milliseconds as an ISO 8601 UTC time to the second."""
    moment = datetime.fromtimestamp(ms / 1000, tz=timezone.utc)
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass(frozen=True)
class Selection:
    """The dead letters a command works on (everything by default)."""

    types: frozenset[str] = frozenset()
    topics: frozenset[str] = frozenset()
    messages: tuple[str, ...] = ()
    since_ms: int | None = None
    until_ms: int | None = None
    as_given: tuple[str | None, str | None] = (None, None)
    """``--since`` and ``--until`` as written (an age means a new time on every run)."""

    @classmethod
    def parse(
        cls, where: Sequence[str], since: str | None = None, until: str | None = None
    ) -> Selection:
        """The selection of ``--where`` clauses and ``--since`` / ``--until``."""
        types: set[str] = set()
        topics: set[str] = set()
        messages: list[str] = []
        for clause in where:
            field, equals, value = clause.partition("=")
            if equals and field.strip() == "type" and value:
                types.add(value)
            elif equals and field.strip() == "topic" and value:
                topics.add(value)
            elif "~" in clause and clause.partition("~")[0].strip() == "message":
                messages.append(clause.partition("~")[2])
            else:
                raise ConfigError(f"--where {clause!r} is not valid; expected {_WHERE_FORMS}")
        start = None if since is None else parse_time(since, "--since")
        stop = None if until is None else parse_time(until, "--until")
        if start is not None and stop is not None and start > stop:
            raise ConfigError(f"--since {since!r} is after --until {until!r}")
        return cls(
            frozenset(types), frozenset(topics), tuple(messages), start, stop, (since, until)
        )

    @property
    def everything(self) -> bool:
        return self == Selection()

    def matches(self, letter: DeadLetter) -> bool:
        stamp = letter.message.timestamp
        if self.since_ms is not None and stamp < self.since_ms:
            return False
        if self.until_ms is not None and stamp > self.until_ms:
            return False
        if self.types and letter.error_type not in self.types:
            return False
        if self.topics and letter.original_topic not in self.topics:
            return False
        return not self.messages or any(text in letter.error_message for text in self.messages)

    def fingerprint(self, *extra: str | None) -> str:
        """A short digest of the selection as given, and of ``extra`` (the same command
        gives the same digest on every run), for a default group name."""
        given = (sorted(self.types), sorted(self.topics), self.messages, self.as_given, extra)
        text = repr(given)
        return hashlib.sha256(text.encode()).hexdigest()[:8]

    def describe(self) -> str:
        """The selection in words, for reports."""
        parts = [f"type {' or '.join(sorted(self.types))}"] if self.types else []
        if self.topics:
            parts.append(f"original topic {' or '.join(sorted(self.topics))}")
        if self.messages:
            parts.append("message containing " + " or ".join(map(repr, self.messages)))
        if self.since_ms is not None:
            parts.append(f"since {format_time(self.since_ms)}")
        if self.until_ms is not None:
            parts.append(f"until {format_time(self.until_ms)}")
        return ", ".join(parts) or "every record"
