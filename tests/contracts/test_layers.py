"""The import contracts of pyproject.toml (``[tool.importlinter]``, run by ``make lint``)
hold for the code, and a deliberate violation breaks them: ``lint-imports`` runs on a copy
of the package, clean and then with one import that crosses a line."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from checkout import ROOT

LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")


def lint_imports(tree: Path) -> subprocess.CompletedProcess[str]:
    """``lint-imports`` on the package in ``tree`` with the checkout's contracts."""
    env = {**os.environ, "PYTHONPATH": str(tree)}
    return subprocess.run(
        [str(LINT_IMPORTS), "--no-cache"],
        cwd=tree,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """A copy of the package and of pyproject.toml (where the contracts are)."""
    shutil.copytree(
        ROOT / "laneway", tmp_path / "laneway", ignore=shutil.ignore_patterns("__pycache__")
    )
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    return tmp_path


def add_import(module: Path, line: str) -> None:
    text = module.read_text()
    head, rest = text.split("from __future__ import annotations\n", 1)
    module.write_text(f"{head}from __future__ import annotations\n\n{line}\n{rest}")


def test_the_contracts_hold_for_the_package(tree: Path) -> None:
    clean = lint_imports(tree)
    assert clean.returncode == 0, clean.stdout + clean.stderr
    assert "Contracts: 2 kept, 0 broken." in clean.stdout


@pytest.mark.parametrize(
    ("module", "line", "contract", "named"),
    [
        (
            "engines/base.py",
            "import laneway.control.plane",
            "laneway's layers",
            "laneway.engines.base -> laneway.control.plane",
        ),
        (
            "ops/lag.py",
            "from laneway.sources.kafka.source import KafkaSource",
            "service and ops reach a backend only through",
            "laneway.ops.lag -> laneway.sources.kafka.source",
        ),
    ],
    ids=["an engine importing the control plane", "ops importing a Kafka source"],
)
def test_an_import_across_a_line_breaks_its_contract(
    tree: Path, module: str, line: str, contract: str, named: str
) -> None:
    add_import(tree / "laneway" / module, line)
    broken = lint_imports(tree)
    assert broken.returncode != 0
    assert "Contracts: 1 kept, 1 broken." in broken.stdout, broken.stdout
    report = broken.stdout.split("Broken contracts", 1)[1]
    assert contract in report and named in report, report
