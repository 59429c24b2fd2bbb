"""Build laneway, compiling the modules of its per-message path with mypyc where it can.

Everything else about the package is in pyproject.toml. The modules to compile are listed
once, in laneway/compiled.py (read here without importing laneway). A wheel or an install
from the sdist compiles them with mypyc; the Python source is packaged beside the
extensions and is what runs when:

* the build cannot compile (no C compiler, no Python headers, mypyc failing): the build
  warns and goes on without extensions, so the install always succeeds;
* ``LANEWAY_PURE_PYTHON=1`` is set at build time (no extensions) or at run time (the
  source is loaded instead, see laneway/compiled.py);
* laneway is installed in editable mode (``pip install -e .``, what ``make`` sets up):
  the source you edit is the code that runs, with no compiled copy to go stale.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = Path(__file__).resolve().parent


def _compiled_settings() -> Any:
    where = ROOT / "laneway" / "compiled.py"
    spec = importlib.util.spec_from_file_location("_laneway_compiled", where)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


COMPILED = _compiled_settings()
SOURCES = [str(Path(*name.split(".")).with_suffix(".py")) for name in COMPILED.MODULES]


def _warn(text: str) -> None:
    print(f"laneway setup.py: {text}", file=sys.stderr)


BUILDS = {"bdist_wheel", "build", "build_ext", "install"}
"""The commands that compile; metadata, sdist and editable builds never pay for mypy."""


def extensions() -> list[Extension]:
    """The mypyc extensions of :data:`SOURCES`, or none (see the module docstring)."""
    if COMPILED.pure_python_requested() or not BUILDS.intersection(sys.argv[1:]):
        return []
    try:
        from mypyc.build import mypycify

        return list(
            mypycify(
                ["--follow-imports=silent", "--ignore-missing-imports", *SOURCES],
                opt_level="3",
                group_name="laneway",
            )
        )
    except (Exception, SystemExit) as error:  # any failure here means "the source runs"
        _warn(f"not compiling ({type(error).__name__}: {error}); the Python source runs")
        return []


class CompileIfPossible(build_ext):
    """build_ext that, when the C compiler fails, removes what it built and goes on: the
    package is then the Python source alone, as if nothing had been compiled."""

    def run(self) -> None:
        try:
            super().run()
        except Exception as error:  # a missing compiler or header, a failing link
            _warn(f"compiling failed ({type(error).__name__}: {error}); the Python source runs")
            for output in self.get_outputs():
                Path(output).unlink(missing_ok=True)


setup(ext_modules=extensions(), cmdclass={"build_ext": CompileIfPossible})
