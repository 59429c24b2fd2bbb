"""The supported Pythons: laneway's tests on CPython 3.10, 3.11, 3.12 and 3.13.

Two sessions per Python, each against laneway installed as a package (not in editable
mode) with the ``dev`` extra:

* ``quick`` (``make pythons``, which ``make test`` runs beside the whole suite): what can
  differ between Pythons: the unit tests, the compiled core checked and every module
  imported (:data:`QUICK`), and the engine contract on the embedded log, the compiled lanes'
  main user, as a smoke. About a minute and a half each;
* ``tests`` (``make test-pythons``, which ``.ci/run`` runs after ``make test``): the tests
  that need no server in ``tests/unit``, ``tests/contracts`` and ``tests/integration``
  (``-m "not kafka and not postgres"``: the unit and contract tests and the integration
  tests on the embedded log).

``make test`` runs the whole suite, Kafka and PostgreSQL included, on the development
Python in ``.venv``. The sessions leave out
``tests/bench`` and ``tests/chaos``: those drive the same engines and sources as the
integration tests, with more messages and kills, so what a Python version can break there
the integration tests meet first; and ``tests/contracts/test_every_module_imports.py``
imports every module, the bench's included, on each Python. Tests marked ``timing``
assert bounds that sessions sharing two cores can break (the adaptive limit's
convergence, say); they run once, in the whole suite, alone.

Interpreters are found on ``PATH`` as ``python3.X``; pyenv's installs under
``~/.pyenv/versions`` are put in front of ``PATH`` first, since pyenv's shims answer only
for the versions selected with ``pyenv global``.
"""

from __future__ import annotations

import os
from pathlib import Path

import nox

PYTHONS = ["3.10", "3.11", "3.12", "3.13"]
SERVERLESS = (
    "not kafka and not cluster and not postgres and not browser and not timing and not compat"
)
FOLDERS = ["tests/unit", "tests/contracts", "tests/integration"]
"""What the ``tests`` session repeats, unless the session's arguments name tests."""
QUICK = [
    "tests/unit",
    "tests/contracts/test_every_module_imports.py",
    "tests/contracts/test_engine_contract.py",
]
"""What the ``quick`` session runs (``tests/unit/test_compiled.py`` checks the compiled core)."""

nox.options.sessions = ["tests"]
nox.options.reuse_existing_virtualenvs = True
nox.options.error_on_missing_interpreters = True


def _pyenv_interpreters_first() -> None:
    versions = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv")) / "versions"
    found = []
    for version in PYTHONS:
        installs = sorted(versions.glob(f"{version}.*"), key=lambda p: p.name, reverse=True)
        found += [str(p / "bin") for p in installs[:1] if (p / "bin" / f"python{version}").exists()]
    os.environ["PATH"] = os.pathsep.join([*found, os.environ.get("PATH", "")])


_pyenv_interpreters_first()


@nox.session(python=PYTHONS)
def tests(session: nox.Session) -> None:
    """The server-free tests of :data:`FOLDERS` on one Python; extra pytest arguments pass
    through, and tests they name replace the folders (``nox -s tests-3.12 -- -x
    tests/bench``).

    laneway comes from the wheel named by ``LANEWAY_WHEEL`` (``make package`` builds one per
    Python, so sessions running side by side never build in the same tree) or else from the
    checkout; either way its per-message modules are compiled (laneway/compiled.py), which
    the tests check (``LANEWAY_EXPECT_COMPILED``), so these sessions test the compiled code
    and ``make test``'s editable install the Python source. It is reinstalled every time:
    the version does not change between commits, so pip would otherwise keep a reused
    environment's old copy.
    """
    _run(session, FOLDERS)


@nox.session(python=PYTHONS)
def quick(session: nox.Session) -> None:
    """:data:`QUICK` on one Python, installed as :func:`tests` installs it."""
    _run(session, QUICK)


def _run(session: nox.Session, default: list[str]) -> None:
    laneway = os.environ.get("LANEWAY_WHEEL") or "."
    session.install("--quiet", f"{laneway}[dev]")
    session.install("--quiet", "--force-reinstall", "--no-deps", laneway)
    session.run(
        "pytest",
        "-q",
        "-p",
        "no:cacheprovider",
        "-m",
        SERVERLESS,
        *session.posargs,
        *([] if any(Path(arg.split("::")[0]).exists() for arg in session.posargs) else default),
        env={"LANEWAY_EXPECT_COMPILED": "1"},
    )
