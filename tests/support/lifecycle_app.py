"""A handler with resources for shutdown tests (signals, drains), configured through the
environment, so that ``laneway run`` processes and process-engine workers record what they
did.

``LIFECYCLE_DIR``: every ``open()`` appends ``open <pid>`` and every ``close()`` appends
``close <pid>`` to ``<dir>/lifecycle.log``; every message appends ``start <pid> <partition>
<offset>`` before its work and ``done <pid> <partition> <offset>`` after it to
``<dir>/handled.log``. ``LIFECYCLE_WORK_MS``: milliseconds each message works (sleeps);
``LIFECYCLE_SLOW_S``: seconds a message whose value is ``b"slow"`` sleeps.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from laneway.types import Message


def _append(name: str, line: str) -> None:
    directory = os.environ.get("LIFECYCLE_DIR")
    if directory:
        with open(Path(directory) / name, "a") as out:
            out.write(line + "\n")


class Recorded:
    """Opens and closes a (pretend) resource once per worker; records every message."""

    def open(self) -> None:
        _append("lifecycle.log", f"open {os.getpid()}")

    def close(self) -> None:
        _append("lifecycle.log", f"close {os.getpid()}")

    def __call__(self, message: Message) -> None:
        where = f"{os.getpid()} {message.partition} {message.offset}"
        _append("handled.log", f"start {where}")
        seconds = float(os.environ.get("LIFECYCLE_WORK_MS", "0")) / 1000.0
        if message.value == b"slow":
            seconds = float(os.environ.get("LIFECYCLE_SLOW_S", "0"))
        if seconds:
            time.sleep(seconds)
        _append("handled.log", f"done {where}")


handler = Recorded()


def lines(directory: Path, name: str) -> list[list[str]]:
    """The lines of ``<directory>/<name>``, split into words (none when it is missing)."""
    path = directory / name
    return [line.split() for line in path.read_text().splitlines()] if path.exists() else []
