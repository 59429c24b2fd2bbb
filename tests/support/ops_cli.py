"""Running the operator's commands (``laneway lag``, ``top``, ``dlq``) as a user does: the
real CLI in a fresh interpreter."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from checkout import ROOT


def environment(extra: dict[str, str] | None = None) -> dict[str, str]:
    """This environment without ``LANEWAY_*`` settings a developer may have exported (the
    test scripts' own variables kept), plus ``extra``."""
    kept = {
        name: value
        for name, value in os.environ.items()
        if not name.startswith("LANEWAY_") or name in ("LANEWAY_BROKER",)
    }
    path = os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])
    return {**kept, "PYTHONPATH": path, "COLUMNS": "200", **(extra or {})}


def command(*args: str) -> list[str]:
    return [sys.executable, "-m", "laneway", *args]


def laneway(
    *args: str, cwd: Path, env: dict[str, str] | None = None, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    """Run ``laneway ARGS``; its exit code and output (stdout, stderr apart)."""
    return subprocess.run(
        command(*args),
        cwd=cwd,
        env=environment(env),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def laneway_json(*args: str, cwd: Path, env: dict[str, str] | None = None) -> Any:
    """Run ``laneway ARGS --json``; it must exit 0; its JSON."""
    done = laneway(*args, "--json", cwd=cwd, env=env)
    assert done.returncode == 0, f"exit {done.returncode}\n{done.stdout}\n{done.stderr}"
    return json.loads(done.stdout)
