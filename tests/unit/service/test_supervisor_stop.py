"""The supervisor of ``laneway run --members``: a member that its stop signal reaches
while still starting (before it set its handlers, so the signal kills it) stopped
cleanly; a member that fails on the signal is still a failure, and the group exits with
that member's own code."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

SUPERVISE = textwrap.dedent(
    """
    import sys
    from laneway.service.supervisor import Supervisor

    member = [sys.executable, "-c", sys.argv[1]]
    sys.exit(Supervisor(member, 2).run())
    """
)
STARTING = "import time; print('started', flush=True); time.sleep(30)"  # SIGTERM kills it (-15)
FAILING = "import signal, sys, time; signal.signal(signal.SIGTERM, lambda *_: sys.exit(1)); "
FAILING += "print('ready', flush=True); time.sleep(30)"
ABANDONING = FAILING.replace("sys.exit(1)", "sys.exit(7)")  # exits.ABANDONED


def _stop_after_start(tmp_path: Path, member: str) -> tuple[int, str]:
    script = tmp_path / "supervise.py"
    script.write_text(SUPERVISE)
    process = subprocess.Popen(
        [sys.executable, str(script), member],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    # Both members started (the supervisor set its handlers first, the failing members
    # theirs before they say "ready"): seen in their output, not assumed after a sleep,
    # which a loaded machine outlasts.
    assert process.stdout is not None
    seen: list[str] = []
    while sum(text.count("started") + text.count("ready") for text in seen) < 2:
        # Counted in the text, not by line: the two members' lines may interleave.
        line = process.stdout.readline()
        if not line:
            break
        seen.append(line)
    process.send_signal(signal.SIGTERM)
    output, _ = process.communicate(timeout=30)
    return process.returncode, "".join(seen) + output


def test_members_killed_by_the_stop_signal_while_starting_stop_cleanly(tmp_path: Path) -> None:
    code, output = _stop_after_start(tmp_path, STARTING)
    assert code == 0, output


def test_a_member_that_fails_on_the_stop_signal_fails_the_group(tmp_path: Path) -> None:
    code, output = _stop_after_start(tmp_path, FAILING)
    assert output.count("ready") == 2, output
    assert code == 1, output


def test_a_member_whose_drain_timed_out_gives_the_group_its_exit_code(tmp_path: Path) -> None:
    code, output = _stop_after_start(tmp_path, ABANDONING)
    assert output.count("ready") == 2, output
    assert code == 7, output
