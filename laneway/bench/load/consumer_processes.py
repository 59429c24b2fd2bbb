"""The ``laneway run`` processes of one topology, and what they cost in CPU and memory."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

import psutil

from laneway.bench.load.topologies import Topology

GROUP_SETTINGS = "[kafka]\nsession.timeout.ms = 6000\nheartbeat.interval.ms = 300\n"
"""Short group timeouts, so members that join late settle within a second or two."""
STOP_TIMEOUT_S = 60.0


class ConsumerProcesses:
    """Runs ``laneway run`` for ``topology`` on ``topic`` (group named like the topic), in a
    session of its own so that :meth:`stop` reaches every member; output goes to a log file
    in ``directory``, shown by :meth:`log_tail` when something fails.

    CPU seconds and peak RSS cover the whole tree: the process ``laneway run`` started as
    and, with ``--members``, every member under it.
    """

    def __init__(
        self,
        topology: Topology,
        bootstrap: str,
        topic: str,
        env: Mapping[str, str],
        directory: Path,
    ) -> None:
        self.topology = topology
        self._config = directory / "consumer.toml"
        self._config.write_text(GROUP_SETTINGS)
        self._log_path = directory / "consumer.log"
        command = [
            sys.executable, "-m", "laneway", "run", topology.handler,
            "--bootstrap-servers", bootstrap, "--topic", topic, "--group", topic,
            *topology.run_flags(), "--config", str(self._config), "--log-level", "warning",
        ]  # fmt: skip
        with self._log_path.open("wb") as log:
            self._process = subprocess.Popen(
                command,
                env={**os.environ, **env},
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        self._root = psutil.Process(self._process.pid)

    def alive(self) -> bool:
        return self._process.poll() is None

    def processes(self) -> list[psutil.Process]:
        """The process ``laneway run`` started as and every process under it."""
        with contextlib.suppress(psutil.Error):
            return [self._root, *self._root.children(recursive=True)]
        return []

    def cpu_seconds(self) -> float:
        """User plus system CPU seconds used so far by :meth:`processes`."""
        total = 0.0
        for process in self.processes():
            with contextlib.suppress(psutil.Error):
                times = process.cpu_times()
                total += times.user + times.system
        return total

    def peak_rss_mb(self) -> float:
        """The sum of every process's peak resident memory (``VmHWM``), in MB."""
        return sum(_peak_rss_kb(process) for process in self.processes()) / 1024.0

    def stop(self) -> int:
        """SIGTERM (members drain and commit), then SIGKILL after ``STOP_TIMEOUT_S``."""
        if self.alive():
            self._process.send_signal(signal.SIGTERM)
        try:
            return self._process.wait(STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self._process.pid, signal.SIGKILL)
            return self._process.wait(STOP_TIMEOUT_S)

    def log_tail(self, characters: int = 1_500) -> str:
        with contextlib.suppress(OSError):
            return self._log_path.read_text(errors="replace")[-characters:].strip()
        return ""


def _peak_rss_kb(process: psutil.Process) -> int:
    """``VmHWM`` of a Linux process (its current RSS elsewhere), in kB."""
    try:
        for line in Path(f"/proc/{process.pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    except (OSError, ValueError):
        pass
    with contextlib.suppress(psutil.Error):
        return int(process.memory_info().rss // 1024)
    return 0
