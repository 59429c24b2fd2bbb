"""A dead letter as read back: the record and what laneway's headers say about it.

The dead-letter router (:mod:`laneway.control.dead_letters.router`) appends
``laneway.error.type``, ``laneway.error.message``, ``laneway.error.traceback``,
``laneway.attempts`` and ``laneway.original.{topic,partition,offset,timestamp}`` to the
record's own headers; a replayed record carries ``laneway.replay.count``. Anyone who can
write the topic can write these headers, so each is read defensively: UTF-8 with
replacement, the last occurrence wins (a record dead-lettered twice carries two sets),
numbers must be whole and not negative, and a header that is missing or wrong makes the
record unusable for a replay to its original topic (:attr:`DeadLetter.problem`) without
stopping anything else.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from laneway.errors import ConfigError
from laneway.sources.topic_names import check_topic_name
from laneway.types import Header, Message

ERROR_PREFIX = "laneway.error."
ORIGINAL_PREFIX = "laneway.original."
ATTEMPTS = "laneway.attempts"
REPLAY_COUNT = "laneway.replay.count"
"""How many times the record was replayed from a dead-letter topic (absent: never)."""

SHOWN_CHARACTERS = 200
"""Longest error message (or other header text) printed; longer ones end in ``...``."""


def short(text: str, limit: int = SHOWN_CHARACTERS) -> str:
    """``text`` on one line, cut to ``limit`` characters."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."


def _texts(headers: Sequence[Header]) -> dict[str, str]:
    """The headers whose name starts with ``laneway.``, as text; the last one wins."""
    found: dict[str, str] = {}
    for name, value in headers:
        if name.startswith("laneway."):
            found[name] = "" if value is None else value.decode("utf-8", "replace")
    return found


def _whole(text: str | None) -> int | None:
    if text is None or not text.strip().isdigit() or len(text.strip()) > 19:
        return None
    return int(text.strip())


@dataclass(frozen=True)
class DeadLetter:
    """One record of a dead-letter topic and its laneway headers."""

    message: Message
    headers: dict[str, str]

    @classmethod
    def of(cls, message: Message) -> DeadLetter:
        return cls(message, _texts(message.headers))

    @property
    def is_dead_letter(self) -> bool:
        """Whether the record carries any of laneway's dead-letter headers."""
        return any(
            name.startswith((ERROR_PREFIX, ORIGINAL_PREFIX)) or name == ATTEMPTS
            for name in self.headers
        )

    @property
    def error_type(self) -> str:
        return self.headers.get(ERROR_PREFIX + "type", "") or "(none)"

    @property
    def error_message(self) -> str:
        return self.headers.get(ERROR_PREFIX + "message", "")

    @property
    def original_topic(self) -> str | None:
        return self.headers.get(ORIGINAL_PREFIX + "topic")

    @property
    def original_partition(self) -> int | None:
        return _whole(self.headers.get(ORIGINAL_PREFIX + "partition"))

    @property
    def replays(self) -> int | None:
        """``laneway.replay.count`` (0 when absent; ``None`` when it is not a count)."""
        text = self.headers.get(REPLAY_COUNT)
        return 0 if text is None else _whole(text)

    @property
    def problem(self) -> str | None:
        """Why the record cannot be replayed at all (its headers), or ``None``."""
        if self.replays is None:
            return f"{REPLAY_COUNT} is not a whole number"
        return None

    def original_problem(self) -> str | None:
        """Why the record cannot go back to its original topic and partition, or ``None``."""
        topic = self.original_topic
        if topic is None:
            return f"no {ORIGINAL_PREFIX}topic header (give --to TOPIC)"
        try:
            check_topic_name(topic, ORIGINAL_PREFIX + "topic")
        except ConfigError:
            return f"{ORIGINAL_PREFIX}topic {short(topic, 60)!r} is not a valid topic name"
        if self.original_partition is None:
            return f"no usable {ORIGINAL_PREFIX}partition header"
        return None

    def replay_headers(self) -> list[Header]:
        """The record's headers for a replay: its own, without laneway's dead-letter
        headers (``laneway.error.*``, ``laneway.attempts``, ``laneway.original.*``) and
        with ``laneway.replay.count`` one more than before."""
        kept = [
            (name, value)
            for name, value in self.message.headers
            if not (
                name.startswith((ERROR_PREFIX, ORIGINAL_PREFIX)) or name in (ATTEMPTS, REPLAY_COUNT)
            )
        ]
        return [*kept, (REPLAY_COUNT, str((self.replays or 0) + 1).encode())]
