"""Handlers for end-to-end tests that record every call, from any engine, to files.

Each process appends one line per handled message to ``<dir>/<pid>.log`` (the directory
comes from the environment, so spawned process-engine workers inherit it). A message's
value is the handler's work in milliseconds as ASCII (``b"0.5"``), or ``b"fail"``.
"""

from __future__ import annotations

import asyncio
import os
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path
from typing import IO

from laneway.types import Message

RECORD_DIR = "LANEWAY_TEST_RECORD_DIR"

_lock = threading.Lock()
_files: dict[tuple[str, int], IO[str]] = {}


@dataclass(frozen=True)
class Call:
    partition: int
    key: str
    offset: int
    pid: int
    start: float
    end: float


def _write(message: Message, start: float, under: str = "", folder: Path | None = None) -> None:
    """Record a call (``under``: a subfolder of the record folder, for a second consumer;
    ``folder``: the record folder the call started in, default the current one)."""
    end = time.monotonic()
    key = "-" if message.key is None else message.key.hex()
    line = f"{message.partition} {key} {message.offset} {os.getpid()} {start!r} {end!r}\n"
    base = Path(os.environ[RECORD_DIR]) if folder is None else folder
    where = (str(base / under), os.getpid())
    with _lock:
        out = _files.get(where)
        if out is None:
            out = _files[where] = open(Path(where[0]) / f"{where[1]}.log", "a", buffering=1)  # noqa: SIM115
        out.write(line)


def _work_seconds(message: Message) -> float:
    value = message.value or b"0"
    if value == b"fail":
        raise ValueError(f"refused offset {message.offset}")
    return float(value) / 1000.0


def handle(message: Message) -> None:
    start, folder = time.monotonic(), Path(os.environ[RECORD_DIR])
    seconds = _work_seconds(message)
    if seconds:
        time.sleep(seconds)
    _write(message, start, folder=folder)


async def handle_async(message: Message) -> None:
    start, folder = time.monotonic(), Path(os.environ[RECORD_DIR])
    seconds = _work_seconds(message)
    if seconds:
        await asyncio.sleep(seconds)
    _write(message, start, folder=folder)


def read_calls(directory: Path) -> list[Call]:
    """Every call recorded in ``directory``. A file's last line without its newline was
    torn by a SIGKILL (Linux stops a write to a file between pages once a fatal signal is
    pending: a line across a page boundary was seen cut at it) and is left out."""
    calls = []
    for path in directory.glob("*.log"):
        lines = path.read_text().split("\n")
        for line in lines[:-1]:  # the last is "" or torn
            p, key, offset, pid, start, end = line.split()
            calls.append(Call(int(p), key, int(offset), int(pid), float(start), float(end)))
    return calls


def duplicates(calls: Iterable[Call]) -> int:
    counts = Counter((c.partition, c.offset) for c in calls)
    return sum(n - 1 for n in counts.values())


def order_violations(calls: list[Call], ordering: str) -> list[str]:
    """Lanes whose calls overlapped or started out of offset order."""
    if ordering == "unordered":
        return []
    lanes: dict[tuple[int, str], list[Call]] = defaultdict(list)
    for call in calls:
        lanes[(call.partition, call.key if ordering == "key" else "")].append(call)
    problems = []
    for lane, lane_calls in lanes.items():
        lane_calls.sort(key=lambda c: c.start)
        for before, after in pairwise(lane_calls):
            if after.offset <= before.offset:
                problems.append(f"{lane}: offset {after.offset} started after {before.offset}")
            if after.start < before.end:
                problems.append(f"{lane}: offsets {before.offset} and {after.offset} overlapped")
    return problems


def peak_concurrency(calls: Iterable[Call]) -> int:
    events = sorted([(c.start, 1) for c in calls] + [(c.end, -1) for c in calls])
    running = peak = 0
    for _, change in events:
        running += change
        peak = max(peak, running)
    return peak
