"""The engines, named once for the tests (``laneway.options.EngineKind`` is the library's own
list; a test that is about every engine parametrizes over :data:`ENGINES`)."""

from __future__ import annotations

from laneway.options import EngineKind

ENGINES = tuple(kind.value for kind in EngineKind)
"""``("sync", "thread", "async", "process")``."""
