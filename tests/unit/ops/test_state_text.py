"""What ``laneway state`` prints of keys and values, which anyone who can write the
changelog chooses: text with what a terminal would act on escaped, the same way as every
other command (``\\x1b``, ``\\xff`` for bytes that are not UTF-8)."""

from __future__ import annotations

from laneway.ops.state import describe
from laneway.state.reading import ChangelogStates, KeyState


def test_keys_and_values_are_printed_escaped() -> None:
    state = KeyState(0, b"acct\x1b]0;owned\x07", 7, 3, b"\xff\x1b[2J12")
    found = ChangelogStates({(0, state.key): state}, records=1)
    text = describe("ledger", found, [state], None, show_values=True)
    assert "\x1b" not in text and "\x07" not in text
    assert "acct\\x1b]0;owned\\x07" in text and "\\xff\\x1b[2J12" in text
    missing = describe("ledger", ChangelogStates({}), [], b"k\x1b[2J", show_values=False)
    assert missing.endswith("no state for key k\\x1b[2J")
