"""Exit codes of ``laneway run`` (documented in ``laneway run --help``)."""

from __future__ import annotations

from laneway.options import STALL_EXIT_CODE

OK = 0
"""Stopped by SIGTERM/SIGINT after a clean drain and final commit."""
FAILED = 1
"""An unexpected error while running (its traceback is logged)."""
USAGE = 2
"""Bad settings or arguments, or a handler that cannot be imported or used."""
SOURCE = 3
"""The source cannot be used: unreachable broker, unknown topic, refused commit."""
STALLED = STALL_EXIT_CODE
"""``on_stall="exit"``: a message stayed in its handler longer than ``stall_timeout``."""
CRASH_LOOP = 5
"""``--members``: a member kept crashing and the supervisor gave up."""

START_UP_FAILURES = frozenset({USAGE, SOURCE})
"""Codes a supervised member does not get restarted for: it would fail the same way."""
