"""Handlers for share-group tests, importable by name (process-engine workers, members).

A record's value says what its handler does: ``b"fail"`` raises, ``b"kill"`` SIGKILLs the
process running it, ``b"hang"`` sleeps for a minute (a member the test then kills), a
number sleeps that many milliseconds, anything else returns at once. Every record
handled (not failed) is appended as ``partition offset delivery_count pid`` to
``<dir>/<pid>.log``, the directory named by ``LANEWAY_TEST_RECORD_DIR``; the kill and hang
cases append ``... started`` first, so a test knows the record ran before the death.
"""

from __future__ import annotations

import asyncio
import os
import signal
import threading
import time
from pathlib import Path
from typing import IO

from laneway.types import Message

RECORD_DIR = "LANEWAY_TEST_RECORD_DIR"

_lock = threading.Lock()
_files: dict[tuple[str, int], IO[str]] = {}


def _note(message: Message, suffix: str = "") -> None:
    line = f"{message.partition} {message.offset} {message.delivery_count} {os.getpid()}{suffix}\n"
    where = (os.environ[RECORD_DIR], os.getpid())
    with _lock:
        out = _files.get(where)
        if out is None:
            path = Path(where[0]) / f"{where[1]}.log"
            out = _files[where] = open(path, "a", buffering=1)  # noqa: SIM115
        out.write(line)


def _special(message: Message) -> float:
    """Act on a special value; the seconds to sleep otherwise."""
    value = message.value or b""
    if value == b"fail":
        raise ValueError(f"refused {message.partition}@{message.offset}")
    if value == b"kill":
        _note(message, " started")
        os.kill(os.getpid(), signal.SIGKILL)
    if value == b"hang":
        _note(message, " started")
        time.sleep(60)
    try:
        return float(value) / 1000.0
    except ValueError:
        return 0.0


def handle(message: Message) -> None:
    seconds = _special(message)
    if seconds:
        time.sleep(seconds)
    _note(message)


async def handle_async(message: Message) -> None:
    seconds = _special(message)
    if seconds:
        await asyncio.sleep(seconds)
    _note(message)


def handled(directory: Path) -> list[tuple[int, int, int, int]]:
    """Every ``(partition, offset, delivery_count, pid)`` recorded as handled in ``directory``."""
    rows = []
    for path in directory.glob("*.log"):
        for line in path.read_text().splitlines():
            parts = line.split()
            if len(parts) == 4:
                rows.append((int(parts[0]), int(parts[1]), int(parts[2]), int(parts[3])))
    return rows


def started(directory: Path) -> list[tuple[int, int, int, int]]:
    """The records whose kill or hang began, as ``(partition, offset, delivery_count, pid)``."""
    rows = []
    for path in directory.glob("*.log"):
        for line in path.read_text().splitlines():
            parts = line.split()
            if len(parts) == 5:
                rows.append((int(parts[0]), int(parts[1]), int(parts[2]), int(parts[3])))
    return rows
