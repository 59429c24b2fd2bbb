"""Running a command on a pseudo-terminal, as an operator's shell does, and what a terminal
would act on in what it wrote."""

from __future__ import annotations

import fcntl
import os
import pty
import select
import signal
import struct
import subprocess
import termios
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

ACTIVE = (b"\x1b", b"\x07", "\x9b".encode(), "\u202e".encode())
"""What a terminal acts on: ESC (CSI ``ESC [``, OSC ``ESC ]``), BEL (which ends an OSC),
the one-character CSI of the C1 controls and a bidirectional override."""


@dataclass(frozen=True)
class Ran:
    """A command's exit code and everything it wrote to the terminal (stdout and stderr
    both: a terminal shows both)."""

    code: int
    output: bytes

    @property
    def text(self) -> str:
        return self.output.decode("utf-8", "replace")


def on_terminal(
    args: Sequence[str],
    *,
    cwd: Path,
    env: dict[str, str],
    timeout: float = 120,
    interrupt_after: float | None = None,
) -> Ran:
    """Run ``args`` with a pseudo-terminal (200 columns) as its stdin, stdout and stderr;
    SIGINT it after ``interrupt_after`` seconds if given (a live view's Ctrl-C)."""
    leader, follower = pty.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 50, 200, 0, 0))
    process = subprocess.Popen(
        list(args), cwd=cwd, env={**env, "TERM": "xterm-256color"},
        stdin=follower, stdout=follower, stderr=follower, start_new_session=True,
    )  # fmt: skip
    os.close(follower)
    output = bytearray()
    began = time.monotonic()
    interrupted = interrupt_after is None
    try:
        while True:
            if not interrupted and time.monotonic() - began >= interrupt_after:  # type: ignore[operator]
                process.send_signal(signal.SIGINT)
                interrupted = True
            assert time.monotonic() - began < timeout, f"{args} still running: {output!r}"
            ready, _, _ = select.select([leader], [], [], 0.1)
            if not ready:
                continue
            try:
                chunk = os.read(leader, 65536)
            except OSError:  # EIO: every writer closed its end
                break
            if not chunk:
                break
            output += chunk
    finally:
        os.close(leader)
        code = process.wait(timeout=30)
    return Ran(code, bytes(output))


def active_sequences(output: bytes) -> list[bytes]:
    """The bytes of :data:`ACTIVE` found in ``output``."""
    return [sequence for sequence in ACTIVE if sequence in output]
