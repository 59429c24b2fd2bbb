"""Importing the handler named on the command line, ``MODULE:ATTR`` (as uvicorn does)."""

from __future__ import annotations

import difflib
import importlib
import os
import sys
import traceback
from collections.abc import Callable
from typing import Any

from laneway.errors import HandlerImportError


def load_handler(reference: str) -> Callable[..., Any]:
    """The object ``reference`` (``package.module:attribute``, the attribute may be
    dotted) names, importing the module from the working directory or ``sys.path``.

    Raises :class:`HandlerImportError` with one line saying what failed: a malformed
    reference, a module that cannot be imported (with the exception raised while
    importing it, and where), or an attribute the module does not have.
    """
    module_name, _, attribute = reference.partition(":")
    if not module_name or not attribute:
        raise HandlerImportError(
            f"handler {reference!r} is not valid; expected MODULE:ATTR, e.g. myapp.handlers:handle"
        )
    if "" not in sys.path and os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        module = importlib.import_module(module_name)
    except Exception as error:
        where = ""
        frames = traceback.extract_tb(error.__traceback__)
        if frames and not isinstance(error, ModuleNotFoundError):
            last = frames[-1]
            where = f" (at {last.filename}:{last.lineno})"
        raise HandlerImportError(
            f"cannot import module {module_name!r} for handler {reference!r}: "
            f"{type(error).__name__}: {error}{where}"
        ) from error
    target: Any = module
    for part in attribute.split("."):
        if not hasattr(target, part):
            names = [name for name in dir(target) if not name.startswith("_")]
            close = difflib.get_close_matches(part, names, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise HandlerImportError(
                f"module {module_name!r} ({getattr(module, '__file__', '?')}) has no attribute "
                f"{attribute!r} for handler {reference!r}{hint}"
            )
        target = getattr(target, part)
    if not callable(target):
        raise HandlerImportError(f"handler {reference!r} is {target!r}, not a callable")
    return target  # type: ignore[no-any-return]
