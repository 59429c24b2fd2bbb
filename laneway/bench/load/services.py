"""The Kafka broker, PostgreSQL server and Jaeger the ``spike`` and ``paced`` benchmarks
need.

An address given on the command line is used as it is. Without one, in a laneway checkout,
the server ``scripts/kafka`` or ``scripts/postgres`` runs for the checkout is used when it
answers, else started, and stopped again when the benchmark ends (as
``scripts/with-services`` does for the tests); so is ``scripts/jaeger`` for ``--jaeger
auto``. Outside a checkout a missing address is a
:class:`~laneway.bench.engines.targets.BenchSetupError` naming the option.
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from types import TracebackType

import laneway
from laneway.bench.engines.targets import BenchSetupError

CHECKOUT = Path(laneway.__file__).resolve().parent.parent
"""Where a source checkout keeps ``scripts/`` (when laneway runs from one)."""
START_TIMEOUT_S = {"kafka": 180.0, "postgres": 180.0, "jaeger": 1800.0}
"""Seconds a server may take to start: Jaeger's first start builds it (~10 minutes on the
2-core reference machine, see docs/project/developing.md)."""
CHECK_TIMEOUT_S = 60.0
"""Seconds a ``status`` or ``stop`` may take."""
CHECKOUT_JAEGER = "auto"
"""``--jaeger auto``: the checkout's Jaeger (``scripts/jaeger``), which gives both URLs."""
OPTION = {"kafka": "--bootstrap-servers", "postgres": "--postgres-dsn", "jaeger": "--jaeger URL"}


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
        status = _run(script, "status", CHECK_TIMEOUT_S)
        if status.returncode == 0:
            return status.stdout.strip()
        self._say(f"starting scripts/{service} (stopped again at the end)")
        self._started.append(script)
        started = _run(script, "start", START_TIMEOUT_S[service])
        if started.returncode != 0:
            raise BenchSetupError(
                f"scripts/{service} start failed: {started.stderr.strip()[-600:]}"
            )
        return started.stdout.strip().splitlines()[-1]

    def jaeger(self) -> dict[str, str]:
        """The checkout's Jaeger's endpoints (``otlp_http``, ``query``, ...): the running
        one, or one started now (its first start builds it, which takes minutes)."""
        return dict(json.loads(self.address("jaeger", None)))

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        for script in reversed(self._started):
            _run(script, "stop", CHECK_TIMEOUT_S)
        self._started.clear()


def _run(script: Path, command: str, timeout: float) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(script), command],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def _stderr(text: str) -> None:
    print(text, file=sys.stderr, flush=True)
