"""Exit codes of ``laneway run`` (documented in ``laneway run --help``)."""

from __future__ import annotations

from laneway.options import STALL_EXIT_CODE

OK = 0
"""Stopped by SIGTERM/SIGINT after a clean drain and final commit."""
FAILED = 1
"""An unexpected error while running (its traceback is logged)."""
USAGE = 2
"""Bad settings or arguments, or a handler that cannot be imported or used; also a state
changelog that ends before what a valid state file holds (deleted and created again, cut
short, another cluster's), unless ``state_changelog_behind`` says what to do."""
SOURCE = 3
"""The source cannot be used: unreachable broker, unknown topic, refused commit."""
STALLED = STALL_EXIT_CODE
"""``on_stall="exit"``: a message stayed in its handler longer than ``stall_timeout``."""
CRASH_LOOP = 5
"""``--members``: a member kept crashing and the supervisor gave up."""
DENIED = 6
"""The cluster refused this consumer: authentication failed (a wrong password, an
untrusted certificate) or an ACL is missing (group, topic read, dead-letter or results
write, transactional id). Restarting does not help until the credentials or ACLs change."""
ABANDONED = 7
"""Stopped, but the drain timed out: messages still in their handlers were abandoned and
their offsets stay uncommitted (they run again after a restart)."""

START_UP_FAILURES = frozenset({USAGE, SOURCE, DENIED})
"""Codes a supervised member does not get restarted for: it would fail the same way."""
