"""What laneway shows of text it did not write: nothing a terminal would act on, and keys
cut to a bound in JSON."""

from __future__ import annotations

import pytest

from laneway.printable import KEY_CHARACTERS, key_text, printable, printable_bytes

CLEAR = "\x1b[2J"
TITLE = "\x1b]0;owned\x07"


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        (f"bad {CLEAR}amount", "bad \\x1b[2Jamount"),
        (f"{TITLE}x", "\\x1b]0;owned\\x07x"),
        ("a\x9b31mb", "a\\x9b31mb"),  # the one-byte CSI of the C1 controls
        ("line\nforged\rline", "line\\nforged\\rline"),
        ("tab\there\x7f", "tab\\there\\x7f"),
        ("evil\u202etxt.exe", "evil\\u202etxt.exe"),  # a bidirectional override
        ("tag\U000e0041", "tag\\U000e0041"),
        ("zero\u200bwidth", "zero\\u200bwidth"),
    ],
)
def test_what_a_terminal_would_act_on_is_escaped(text: str, shown: str) -> None:
    assert printable(text) == shown
    assert printable(text).isprintable()


def test_printable_text_is_left_as_it_is() -> None:
    for text in ("ValueError: bad amount", "Zürich 日本 ✓", "C:\\path\\x1b", ""):
        assert printable(text) is text


def test_newlines_are_kept_only_when_asked() -> None:
    traceback = f"Traceback:\n  raise ValueError('{CLEAR}')\n"
    assert printable(traceback, keep="\n") == "Traceback:\n  raise ValueError('\\x1b[2J')\n"


def test_bytes_that_are_not_utf8_are_escaped_the_same_way() -> None:
    assert printable_bytes(b"k\xff\x1b[2J\xc3\xa9") == "k\\xff\\x1b[2Jé"


def test_a_key_in_json_is_cut_with_its_length() -> None:
    assert key_text(b"acct-1") == "acct-1"
    assert key_text(b"\xff" * 10) == "\\xff" * 10
    exact = b"k" * KEY_CHARACTERS
    assert key_text(exact) == exact.decode()
    assert key_text(b"k" * 100_000) == "k" * KEY_CHARACTERS + "...[100000 bytes]"
    assert key_text("é".encode() * 1000) == "é" * KEY_CHARACTERS + "...[2000 bytes]"
    assert key_text(b"\xff" * 100) == ("\\xff" * 100)[:KEY_CHARACTERS] + "...[100 bytes]"
