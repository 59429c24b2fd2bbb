"""The ``--members N`` supervisor: N ``laneway run`` processes in one consumer group."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from types import FrameType

from laneway.logs import get_logger
from laneway.service import exits
from laneway.service.settings import MEMBER_VARIABLE
from laneway.sources.share.preview_warning import PREVIEW_WARNED, preview_warned

log = get_logger(__name__)

CRASHES_ALLOWED = 5
"""Crashes of one member within ``CRASH_WINDOW`` seconds after which the supervisor gives
up and stops everything (exit code 5)."""
CRASH_WINDOW = 60.0
FIRST_BACKOFF = 0.5
"""Seconds before a crashed member is restarted; doubles per crash in the window, up to
``MAX_BACKOFF``."""
MAX_BACKOFF = 30.0
CHECK_EVERY = 0.2


@dataclass
class _Member:
    index: int
    process: subprocess.Popen[bytes] | None = None
    restart_at: float | None = None
    crashes: deque[float] = field(default_factory=deque)
    exit_code: int | None = None


class Supervisor:
    """Runs ``members`` copies of this ``laneway run`` command (each told its index by the
    ``LANEWAY_MEMBER_INDEX`` variable, which makes it a member rather than a supervisor).

    A member that exits while nothing asked it to is restarted after a backoff (0.5 s,
    doubling up to 30 s); one that fails at start-up (exit 2 or 3) stops the whole group
    with its exit code, since a restart would fail the same way; five crashes of one
    member within a minute stop the group with exit code 5. SIGTERM and SIGINT are
    forwarded to every member, which drain and commit; a second signal is forwarded
    too (members abort their drain). The supervisor exits 0 once every member stopped
    cleanly, else with the first member's own exit code (7 for a drain that timed out,
    1 for a member killed by a signal).
    """

    def __init__(self, command: Sequence[str], members: int) -> None:
        self._command = list(command)
        self._members = [_Member(index) for index in range(members)]
        self._stopping = False

    def run(self) -> int:
        previous = {
            sig: signal.signal(sig, self._on_signal) for sig in (signal.SIGTERM, signal.SIGINT)
        }
        try:
            for member in self._members:
                self._start(member)
            return self._watch()
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)

    def _watch(self) -> int:
        while True:
            now = time.monotonic()
            for member in self._members:
                process = member.process
                if process is not None and process.poll() is not None:
                    verdict = self._exited(member, process.returncode, now)
                    if verdict is not None:
                        self._stop_all(signal.SIGTERM)
                        self._wait_all()
                        return verdict
                if (
                    member.restart_at is not None
                    and now >= member.restart_at
                    and not self._stopping
                ):
                    self._start(member)
            if self._stopping and all(m.process is None for m in self._members):
                return _group_code([m.exit_code for m in self._members])
            time.sleep(CHECK_EVERY)

    def _exited(self, member: _Member, code: int, now: float) -> int | None:
        """Account for a member's exit; an exit code for the supervisor when it must stop."""
        member.process = None
        if self._stopping and code in _STOPPED_BY_SIGNAL:
            # Our stop signal reached a member still starting, before it set its handlers:
            # it had consumed nothing, so nothing of it is lost or left uncommitted.
            log.info("member %d stopped while starting", member.index)
            code = exits.OK
        member.exit_code = code
        if self._stopping:
            log.info("member %d stopped (exit code %d)", member.index, code)
            return None
        if code in exits.START_UP_FAILURES:
            log.error("member %d could not start (exit code %d); stopping", member.index, code)
            self._stopping = True
            return code
        member.crashes.append(now)
        while member.crashes and now - member.crashes[0] > CRASH_WINDOW:
            member.crashes.popleft()
        if len(member.crashes) >= CRASHES_ALLOWED:
            log.error(
                "member %d crashed %d times within %.0f s (last exit code %d); giving up",
                member.index,
                len(member.crashes),
                CRASH_WINDOW,
                code,
            )
            self._stopping = True
            return exits.CRASH_LOOP
        delay = min(MAX_BACKOFF, FIRST_BACKOFF * 2 ** (len(member.crashes) - 1))
        log.warning(
            "member %d exited with code %d; restarting it in %.1f s", member.index, code, delay
        )
        member.restart_at = now + delay
        return None

    def _start(self, member: _Member) -> None:
        env = {**os.environ, MEMBER_VARIABLE: str(member.index)}
        if preview_warned():  # the members need not repeat the share consumer's warning
            env[PREVIEW_WARNED] = "1"
        member.process = subprocess.Popen(self._command, env=env)
        member.restart_at = None
        log.info("member %d started (pid %d)", member.index, member.process.pid)

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        self._stopping = True
        for member in self._members:
            member.restart_at = None
        self._stop_all(signal.Signals(signum))

    def _stop_all(self, sig: signal.Signals) -> None:
        for member in self._members:
            if member.process is not None and member.process.poll() is None:
                member.process.send_signal(sig)

    def _wait_all(self) -> None:
        for member in self._members:
            if member.process is not None:
                try:
                    member.process.wait(60)
                except subprocess.TimeoutExpired:
                    member.process.kill()
                member.process = None


def _group_code(codes: list[int | None]) -> int:
    """The supervisor's exit code once every member stopped: 0 when each stopped cleanly,
    else the first member's own code, so an orchestrator sees why (1 for a member that a
    signal killed, or that never came back from a crash)."""
    for code in codes:
        if code:
            return code if code > 0 else exits.FAILED
        if code is None:
            return exits.FAILED
    return exits.OK


_STOPPED_BY_SIGNAL = (-signal.SIGTERM, -signal.SIGINT)
"""Exit codes of a member the supervisor's own stop signal killed (``Popen.returncode``)."""


def member_command(argv: Sequence[str]) -> list[str]:
    """The command that starts one member: this interpreter running ``laneway`` with the
    same arguments (the member variable makes it a member)."""
    return [sys.executable, "-m", "laneway", *argv]
