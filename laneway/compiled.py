"""laneway's compiled core: which modules are compiled, and running without them.

The modules of the per-message path named in :data:`MODULES` (offset tracking and the
lanes of the thread and async engines) are compiled to C extensions with mypyc when
laneway is built from source on a machine with a C compiler (``setup.py`` reads this list),
and the wheels are built that way. Their Python source ships beside them and is the same
code: the extension is that source compiled, so behaviour is the same either way, only
faster (``laneway bench`` prints which one ran; ``docs/guides/benchmarking.md`` has the
figures).

``LANEWAY_PURE_PYTHON=1`` in the environment runs the Python source instead: set when
laneway is imported (process-engine workers inherit it), it makes these modules load from
their ``.py`` files. Use it to tell whether a problem lies in the compiled code, to
measure what compiling buys (the same install, with and without), or to debug or profile
those modules line by line. At build time (``pip install`` from the source) the same
variable builds no extensions at all.

A build without a C compiler falls back to the Python source silently; :func:`active`
says which one is running.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import os
import sys
from collections.abc import Sequence
from types import ModuleType

MODULES = (
    "laneway.offsets.codec",
    "laneway.offsets.footprint",
    "laneway.offsets.offset_progress",
    "laneway.offsets.partition",
    "laneway.offsets.tracker",
    "laneway.offsets.transactional",
    "laneway.engines.claims",
    "laneway.engines.lanes",
)
"""The modules compiled with mypyc (each is strictly typed Python that stays importable as
is). Add one only with its before/after figures from ``laneway bench``: a compiled module
cannot be monkeypatched from outside and its classes cannot be subclassed by Python code
(``transactional`` is here because its class extends ``offset_progress``'s)."""

PURE_PYTHON = "LANEWAY_PURE_PYTHON"
"""The environment variable that, set to ``1``, runs (or builds) the Python source only."""


def pure_python_requested() -> bool:
    """Whether ``LANEWAY_PURE_PYTHON=1`` asks for the Python source."""
    return os.environ.get(PURE_PYTHON) == "1"


def active() -> bool:
    """Whether the compiled modules are the ones running (imports one to find out)."""
    module = importlib.import_module(MODULES[0])
    return not str(module.__file__).endswith(".py")


class SourceFirst:
    """An import finder that loads the compiled modules from their ``.py`` source (the
    default finder prefers an extension module of the same name)."""

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname not in MODULES or not path:
            return None
        name = fullname.rpartition(".")[2]
        for folder in path:
            source = os.path.join(folder, f"{name}.py")
            if os.path.isfile(source):
                return importlib.util.spec_from_file_location(fullname, source)
        return None


def honour_pure_python() -> None:
    """Install :class:`SourceFirst` if ``LANEWAY_PURE_PYTHON=1`` (``laneway/__init__.py``
    calls this before any compiled module can be imported)."""
    if pure_python_requested() and not any(isinstance(f, SourceFirst) for f in sys.meta_path):
        sys.meta_path.insert(0, SourceFirst())
