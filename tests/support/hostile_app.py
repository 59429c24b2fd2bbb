"""A handler for ``laneway run`` whose failures carry terminal sequences: every message
fails with an error whose type and text set the window title and clear the screen."""

from __future__ import annotations

import laneway

CLEAR = "\x1b[2J"
TITLE = "\x1b]0;owned\x07"

HostileError = type(f"Bad{TITLE}Error", (ValueError,), {})


def handle(message: laneway.Message) -> None:
    raise HostileError(f"amount {CLEAR}rejected{TITLE}\n2026-01-01 INFO forged: all is well")
