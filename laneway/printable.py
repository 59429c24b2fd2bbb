"""Text laneway did not write, made fit to show: message keys, header names and values,
error types and messages, topic and member names, anything read from the log, the group,
a broker or a member.

:func:`printable` is for a terminal. Every character that is not printable (see
:func:`str.isprintable`: the control characters, ESC, BEL, CR and newline among them,
DEL and the C1 controls, bidirectional overrides and the other format characters,
unassigned code points) is written as its Python escape (``\\x1b``, ``\\u202e``), so a
record cannot clear the operator's screen, set the window title, move the cursor, hide
text or start a line of its own. Every CLI command prints such text through it (tables,
dead letters, error lines, and log lines through :class:`PrintableFormatter`); JSON
output needs no more than JSON's own escaping.

:func:`key_text` is for JSON (``/readyz``, ``/backlog``, ``/status.json``): a key as text,
its bytes that are not UTF-8 as ``\\xff``, cut to :data:`KEY_CHARACTERS` with a marker.
"""

from __future__ import annotations

import logging

KEY_CHARACTERS = 256
"""The most of a key an answer shows; a longer key is cut there and ends in
``...[N bytes]`` (its whole length), so a 100 KB key costs an answer a few hundred bytes."""


def printable(text: str, keep: str = "") -> str:
    """``text`` with every character that is not printable escaped as Python does
    (``\\x1b``, ``\\n``, ``\\u202e``, ``\\U000e0001``) but those in ``keep`` (``"\\n"``
    for text of several lines, such as a traceback)."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() or c in keep else _escaped(c) for c in text)


def printable_bytes(data: bytes, keep: str = "") -> str:
    """``data`` as UTF-8 text, its other bytes as ``\\xff``, made :func:`printable`."""
    return printable(data.decode("utf-8", "backslashreplace"), keep)


def key_text(key: bytes, limit: int = KEY_CHARACTERS) -> str:
    """``key`` as text for JSON (bytes that are not UTF-8 as ``\\xff``), at most ``limit``
    characters and, when cut, ``...[N bytes]``."""
    text = key[: limit * 4 + 4].decode("utf-8", "backslashreplace")
    if len(text) <= limit:
        return text  # a character takes at most four bytes: the key was not cut
    return f"{text[:limit]}...[{len(key)} bytes]"


class PrintableFormatter(logging.Formatter):
    """A log format for a terminal: the message (which may quote a key, a broker's error,
    a member's answer) made :func:`printable`, newline included, so it stays one line; a
    traceback's lines kept apart but made printable too."""

    def format(self, record: logging.LogRecord) -> str:
        shown = logging.makeLogRecord(record.__dict__)
        shown.msg, shown.args = printable(record.getMessage()), None
        return printable(super().format(shown), keep="\n")


_SHORT = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escaped(character: str) -> str:
    if character in _SHORT:
        return _SHORT[character]
    code = ord(character)
    if code < 0x100:
        return f"\\x{code:02x}"
    if code < 0x10000:
        return f"\\u{code:04x}"
    return f"\\U{code:08x}"
