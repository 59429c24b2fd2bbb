"""Per-process counts for the ``members`` scenario: the counting handler, and the row that
its counts add up to.

Every member process, and every worker process of the ``process`` engine, runs a
:class:`CountingBusy` that writes what it handled and when to a file of its own when it
closes; :func:`collect` reads those files into one :class:`Configuration`, the scenario's
row for that many members or workers.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass
from multiprocessing.sharedctypes import Synchronized
from pathlib import Path

from laneway.bench.engines.workloads import CpuSpin
from laneway.types import Message


class CountingBusy:
    """The handler: ``seconds`` of busy CPU; counts per process what it handled and when.

    ``close()`` (once per worker process, or once in a member's consumer) writes
    ``<directory>/<label>-<pid>.json``: the messages handled, the first start and last end
    (``time.monotonic_ns``, one clock for all processes) and the sequence numbers seen.
    """

    def __init__(self, seconds: float, directory: str, label: str) -> None:
        self.seconds = seconds
        self.directory = directory
        self.label = label
        self.reset()

    def reset(self) -> None:
        self.work = CpuSpin(self.seconds)
        self.first = 0
        self.last = 0
        self.sequences: list[int] = []
        self.progress: Synchronized[int] | None = None

    def __reduce__(self) -> tuple[type[CountingBusy], tuple[float, str, str]]:
        return (CountingBusy, (self.seconds, self.directory, self.label))

    def __call__(self, message: Message) -> None:
        start = time.monotonic_ns()
        self.work(message)
        if not self.first:
            self.first = start
        self.last = time.monotonic_ns()
        self.sequences.append(int((message.value or b"-1")[:10]))
        if self.progress is not None:
            with self.progress.get_lock():
                self.progress.value += 1

    def open(self) -> None:
        """Nothing to open."""

    def close(self) -> None:
        path = Path(self.directory) / f"{self.label}-{os.getpid()}.json"
        data = {"first": self.first, "last": self.last, "sequences": self.sequences}
        path.write_text(json.dumps(data), encoding="utf-8")


@dataclass
class Configuration:
    """One row: ``count`` members (or workers), their loads and the resulting figures."""

    kind: str
    count: int
    loads: list[int]
    handled: int
    distinct: int
    produced: int
    runtime_s: float
    tps: float
    scaling: float = 0.0
    efficiency: float = 0.0
    error: str | None = None

    @property
    def delivery(self) -> str:
        return f"{self.distinct:,}/{self.produced:,}"


def collect(
    kind: str, count: int, directory: Path, produced: int, error: str | None = None
) -> Configuration:
    """The row the ``<label>-<pid>.json`` files in ``directory`` add up to; its error is
    ``error`` if given, else set when the distinct messages handled are not ``produced``."""
    files = sorted(directory.glob("*.json"))
    loads, firsts, lasts, seen = [], [], [], []
    for path in files:
        data = json.loads(path.read_text(encoding="utf-8"))
        loads.append(len(data["sequences"]))
        seen.extend(data["sequences"])
        if data["first"]:
            firsts.append(data["first"])
            lasts.append(data["last"])
    runtime = (max(lasts) - min(firsts)) / 1e9 if firsts else 0.0
    distinct = len(set(seen))
    if error is None and distinct != produced:
        error = f"delivered {distinct:,} of {produced:,}"
    tps = distinct / runtime if runtime > 0 else 0.0
    return Configuration(
        kind, count, loads, len(seen), distinct, produced, runtime, tps, error=error
    )
