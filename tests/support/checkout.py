"""Where the checkout's files are, for tests in any folder below ``tests/``."""

from pathlib import Path

SUPPORT = Path(__file__).resolve().parent
"""``tests/support``: helpers importable by name, also from spawned processes."""
ROOT = SUPPORT.parent.parent
"""The checkout's root (``README.md``, ``docs/``, ``examples/``, ``scripts/``)."""
