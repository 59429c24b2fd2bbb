"""The compiled core: which code runs, and LANEWAY_PURE_PYTHON=1 running the source.

An editable install (``make test``'s .venv) runs the Python source; the nox sessions install
the compiled wheels and say so with ``LANEWAY_EXPECT_COMPILED=1`` (noxfile.py), so a wheel
that quietly fell back to the source fails there.
"""

from __future__ import annotations

import importlib.machinery
import json
import os
import subprocess
import sys
from pathlib import Path

import laneway
from laneway import compiled
from laneway.compiled import MODULES, SourceFirst

PACKAGE = Path(laneway.__file__).parent


def test_the_modules_run_as_the_install_built_them() -> None:
    expected = os.environ.get("LANEWAY_EXPECT_COMPILED") == "1"
    assert compiled.active() is expected


def test_every_listed_module_has_its_python_source() -> None:
    for name in MODULES:
        assert name.startswith("laneway.")
        source = PACKAGE.joinpath(*name.split(".")[1:]).with_suffix(".py")
        assert source.is_file(), name


def _files_of_modules(environment: dict[str, str], cwd: Path) -> dict[str, str]:
    """Where each compiled module was loaded from, in a new interpreter run from ``cwd`` (not
    the checkout, whose laneway would shadow the installed one)."""
    script = (
        "import importlib, json, laneway.compiled as c; "
        "print(json.dumps({n: importlib.import_module(n).__file__ for n in c.MODULES}))"
    )
    done = subprocess.run(
        [sys.executable, "-c", script],
        env={**os.environ, **environment},
        capture_output=True,
        text=True,
        check=True,
        cwd=cwd,
    )
    files: dict[str, str] = json.loads(done.stdout)
    return files


def test_pure_python_loads_every_compiled_module_from_its_source(tmp_path: Path) -> None:
    files = _files_of_modules({"LANEWAY_PURE_PYTHON": "1"}, tmp_path)
    assert set(files) == set(MODULES)
    for name, file in files.items():
        assert file.endswith(".py"), (name, file)
        assert Path(file).resolve().parent.is_relative_to(PACKAGE.resolve())


def test_without_the_variable_every_module_loads_as_the_install_built_it(tmp_path: Path) -> None:
    files = _files_of_modules({"LANEWAY_PURE_PYTHON": "0"}, tmp_path)
    expected = os.environ.get("LANEWAY_EXPECT_COMPILED") == "1"
    assert {name: not file.endswith(".py") for name, file in files.items()} == dict.fromkeys(
        MODULES, expected
    )


def test_the_finder_leaves_every_other_module_to_the_usual_import() -> None:
    finder = SourceFirst()
    assert finder.find_spec("laneway.types", [str(PACKAGE)]) is None
    assert finder.find_spec("json", None) is None
    spec = finder.find_spec("laneway.offsets.tracker", [str(PACKAGE / "offsets")])
    assert spec is not None and spec.origin == str(PACKAGE / "offsets" / "tracker.py")
    assert isinstance(spec.loader, importlib.machinery.SourceFileLoader)
