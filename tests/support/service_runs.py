"""``laneway run`` processes started by tests: launch, wait for a condition, clean up."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from laneway.sources.share.preview_warning import PREVIEW_WARNED

SUPPORT = Path(__file__).resolve().parent
FAST_GROUP = "session.timeout.ms = 6000\nheartbeat.interval.ms = 300\n"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_until(condition: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.1)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")


class Service:
    """``laneway run <handler>`` processes started by a test (``handler`` importable from
    ``paths``), killed at teardown if still running. ``kafka_file`` is a ``--config`` file
    with short group timeouts, so a killed member's partitions move on quickly."""

    def __init__(
        self,
        tmp_path: Path,
        handler: str,
        paths: Sequence[Path],
        env: dict[str, str] | None = None,
    ) -> None:
        self.tmp_path = tmp_path
        self.handler = handler
        self.processes: list[subprocess.Popen[str]] = []
        # A fresh process tree: PREVIEW_WARNED inherited from outside would silence the
        # service's own share-consumer warning.
        inherited = {name: value for name, value in os.environ.items() if name != PREVIEW_WARNED}
        self.env = {
            **inherited,
            "PYTHONPATH": os.pathsep.join([*map(str, paths), os.environ.get("PYTHONPATH", "")]),
            **(env or {}),
        }
        self.kafka_file = tmp_path / "kafka.toml"
        self.kafka_file.write_text(f"[kafka]\n{FAST_GROUP}")

    def start(self, *args: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
        process = subprocess.Popen(
            [sys.executable, "-m", "laneway", "run", self.handler, *args],
            env={**self.env, **(env or {})},
            cwd=self.tmp_path,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,  # members of --members too are killed at teardown
        )
        self.processes.append(process)
        return process

    def run(self, *args: str, env: dict[str, str] | None = None) -> tuple[int, str]:
        process = self.start(*args, env=env)
        output, _ = process.communicate(timeout=60)
        return process.returncode, output

    def kill(self, process: subprocess.Popen[str]) -> None:
        """SIGKILL the process and its members; wait for them."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.communicate(timeout=30)

    def close(self) -> None:
        for process in self.processes:
            self.kill(process)
