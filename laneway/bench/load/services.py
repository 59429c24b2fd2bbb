"""The Kafka broker and PostgreSQL server the ``spike`` and ``paced`` benchmarks need.

An address given on the command line is used as it is. Without one, in a laneway checkout,
the server ``scripts/kafka`` or ``scripts/postgres`` runs for the checkout is used when it
answers, else started, and stopped again when the benchmark ends (as
``scripts/with-services`` does for the tests). Outside a checkout a missing address is a
:class:`~laneway.bench.engines.targets.BenchSetupError` naming the option.
"""

from __future__ import annotations

import contextlib
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from types import TracebackType

import laneway
from laneway.bench.engines.targets import BenchSetupError

CHECKOUT = Path(laneway.__file__).resolve().parent.parent
"""Where a source checkout keeps ``scripts/`` (when laneway runs from one)."""
START_TIMEOUT_S = 180.0
OPTION = {"kafka": "--bootstrap-servers", "postgres": "--postgres-dsn"}


class Services(contextlib.AbstractContextManager["Services"]):
    """Resolves the servers' addresses; stops, on exit, the servers it started."""

    def __init__(self, say: Callable[[str], None] | None = None) -> None:
        self._started: list[Path] = []
        self._say = say or _stderr

    def address(self, service: str, given: str | None) -> str:
        """``given``, or the checkout's running server, or one started now."""
        if given:
            return given
        script = CHECKOUT / "scripts" / service
        if not script.is_file():
            raise BenchSetupError(
                f"{OPTION[service]} is needed: laneway is not running from a checkout with "
                f"scripts/{service} to start a server"
            )
        status = _run(script, "status")
        if status.returncode == 0:
            return status.stdout.strip()
        self._say(f"starting scripts/{service} (stopped again at the end)")
        self._started.append(script)
        started = _run(script, "start")
        if started.returncode != 0:
            raise BenchSetupError(
                f"scripts/{service} start failed: {started.stderr.strip()[-600:]}"
            )
        return started.stdout.strip().splitlines()[-1]

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        for script in reversed(self._started):
            _run(script, "stop")
        self._started.clear()


def _run(script: Path, command: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(script), command],
        capture_output=True,
        text=True,
        timeout=START_TIMEOUT_S,
        check=False,
    )


def _stderr(text: str) -> None:
    print(text, file=sys.stderr, flush=True)
