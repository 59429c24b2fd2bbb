"""The ``laneway`` command imports a subcommand only when it is used: ``laneway --help``,
``laneway run --help`` and a real ``laneway run`` load no ``laneway.bench`` module, and
``laneway bench`` still loads and answers.

Each command runs in a fresh interpreter (``python -c``), since the test process has long
imported the bench; the interpreter reports what ``sys.modules`` then holds.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import click
import pytest
from checkout import ROOT

from laneway.cli import LAZY_COMMANDS, main
from laneway.sources.embedded.log import EmbeddedLog

PROBE = """
import json, sys
from laneway.cli import main

code = 0
try:
    main(json.loads(sys.argv[1]), prog_name="laneway", standalone_mode=False)
except SystemExit as stop:
    code = stop.code if isinstance(stop.code, int) else 1
sys.stdout.flush()
bench = sorted(m for m in sys.modules if m == "laneway.bench" or m.startswith("laneway.bench."))
ops = sorted(m for m in sys.modules if m == "laneway.ops" or m.startswith(("laneway.ops.", "rich")))
print("\\nPROBE " + json.dumps({"code": code, "bench": bench, "ops": ops}))
"""

HANDLER = """
import os, signal

def handle(message):
    with open("handled", "a") as out:
        out.write(f"{message.offset}\\n")
    if message.offset == 2:
        os.kill(os.getpid(), signal.SIGTERM)  # drain, commit, exit 0
"""


def probe(args: list[str], cwd: Path) -> tuple[int, list[str], str]:
    """Run ``laneway ARGS`` in a new interpreter: its exit code, the ``laneway.bench``
    modules it had imported by the end, and what it printed."""
    found, output = probe_modules(args, cwd)
    return found["code"], found["bench"], output


def probe_modules(args: list[str], cwd: Path) -> tuple[dict[str, Any], str]:
    """Run ``laneway ARGS`` in a new interpreter: its exit code (``code``), the
    ``laneway.bench`` modules (``bench``) and the ``laneway.ops`` and rich modules
    (``ops``) it had imported by the end, and what it printed."""
    done = subprocess.run(
        [sys.executable, "-c", PROBE, json.dumps(args)],
        cwd=cwd,
        env={
            **os.environ,
            "PYTHONPATH": os.pathsep.join([str(cwd), str(ROOT), os.environ.get("PYTHONPATH", "")]),
            "COLUMNS": "80",
        },
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    output, marker, report = done.stdout.rpartition("\nPROBE ")
    assert marker, f"the probe did not finish: {done.stdout}\n{done.stderr}"
    found: dict[str, Any] = json.loads(report)
    return found, output + done.stderr


def test_laneway_help_lists_every_command_without_importing_the_bench(tmp_path: Path) -> None:
    code, bench, output = probe(["--help"], tmp_path)
    assert code == 0, output
    assert bench == [], bench
    listed = output.split("Commands:")[1]
    for name in ("bench", "demo", "dlq", "lag", "run", "top"):
        assert f"\n  {name} " in listed, output
    assert "Measure which engine fits which workload, with numbers." in listed
    assert "Run HANDLER (MODULE:ATTR" in listed


def test_laneway_help_and_run_import_no_ops_module(tmp_path: Path) -> None:
    for args in (["--help"], ["run", "--help"]):
        found, output = probe_modules(args, tmp_path)
        assert found["code"] == 0, output
        assert found["ops"] == [], (args, found["ops"])


def test_each_ops_command_imports_only_what_it_needs(tmp_path: Path) -> None:
    """``laneway lag`` and ``laneway dlq`` work on the core install: no rich; ``top``
    imports rich only for its live view, not for ``--help``."""
    for name in ("lag", "top", "dlq"):
        found, output = probe_modules([name, "--help"], tmp_path)
        assert found["code"] == 0, output
        assert f"Usage: laneway {name} [OPTIONS]" in output
        assert not [m for m in found["ops"] if m.startswith("rich")], found["ops"]
        assert "laneway.ops.top.live" not in found["ops"]
    found, _ = probe_modules(["lag", "--help"], tmp_path)
    assert not [m for m in found["ops"] if m.startswith(("laneway.ops.dlq", "laneway.ops.top"))]


def test_laneway_run_help_imports_no_bench_module(tmp_path: Path) -> None:
    code, bench, output = probe(["run", "--help"], tmp_path)
    assert code == 0, output
    assert "Usage: laneway run [OPTIONS] [HANDLER]" in output
    assert bench == [], bench


def test_a_laneway_run_imports_no_bench_module(tmp_path: Path) -> None:
    log = EmbeddedLog(tmp_path / "log")
    log.create_topic("orders", partitions=1)
    for i in range(3):
        log.produce("orders", b"%d" % i, b"k")
    log.close()
    (tmp_path / "probe_handler.py").write_text(HANDLER)
    args = ["run", "probe_handler:handle", "--log-dir", str(tmp_path / "log")]
    args += ["--topic", "orders", "--group", "probe", "--engine", "sync"]
    code, bench, output = probe(args, tmp_path)
    assert code == 0, output
    assert (tmp_path / "handled").read_text().split() == ["0", "1", "2"]
    assert bench == [], bench


def test_laneway_bench_help_still_loads_the_bench(tmp_path: Path) -> None:
    code, bench, output = probe(["bench", "--help"], tmp_path)
    assert code == 0, output
    assert "Usage: laneway bench [OPTIONS] [COMMAND] [ARGS]..." in output
    for subcommand in ("bus", "byte-bound", "compare"):
        assert f"\n  {subcommand} " in output.split("Commands:")[1], output
    assert "laneway.bench.command" in bench


@pytest.mark.parametrize("name", sorted(LAZY_COMMANDS))
def test_each_summary_is_the_first_paragraph_of_its_command_help(name: str) -> None:
    """What ``laneway --help`` shows for a command not yet imported is what it would show
    with the command imported, at any terminal width."""
    command = LAZY_COMMANDS[name].load()
    assert command.name == name
    stand_in = click.Command(name, help=LAZY_COMMANDS[name].summary)
    for limit in range(20, 200, 7):
        assert stand_in.get_short_help_str(limit) == command.get_short_help_str(limit)
    assert main.get_command(click.Context(main), name) is command
