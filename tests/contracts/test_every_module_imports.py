"""Every module of the package imports on this Python, the benchmark suite included.

The other Pythons' sessions (noxfile.py) run the unit, contract and integration tests, not
the bench and chaos files; this keeps a module that only those files reach from breaking
on one Python (a newer stdlib name, new syntax) without a test noticing. Run in a fresh
interpreter, so that each import is made here and not inherited from another test."""

from __future__ import annotations

import json
import pkgutil
import subprocess
import sys

import laneway

PROBE = """
import importlib, json, sys, traceback
failed = {}
for name in json.loads(sys.argv[1]):
    try:
        importlib.import_module(name)
    except Exception:
        failed[name] = traceback.format_exc(limit=3)
print(json.dumps(failed))
"""


def every_module() -> list[str]:
    found = ["laneway"]
    for module in pkgutil.walk_packages(laneway.__path__, "laneway."):
        if module.name != "laneway.__main__":  # it runs the command line
            found.append(module.name)
    return found


def test_every_module_of_the_package_imports() -> None:
    names = every_module()
    assert "laneway.bench.load.jaeger_traces" in names and "laneway.sources.backends" in names
    done = subprocess.run(
        [sys.executable, "-c", PROBE, json.dumps(names)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    failed = json.loads(done.stdout.splitlines()[-1])
    assert failed == {}, "\n".join(f"{name}:\n{why}" for name, why in failed.items())
