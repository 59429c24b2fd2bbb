"""The CPU seconds one benchmark run costs, split by whom: this process, its worker
processes, and the Kafka client's own threads.

Used by :mod:`laneway.bench.engines.stage_costs` (see there why each is counted as it is).
Linux only: threads and workers are read from ``/proc``.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import resource
import threading
from collections.abc import Callable
from pathlib import Path

METER_INTERVAL_S = 0.02
"""How often the client's threads (and, until the first message, the workers) are read."""


def _cpu(who: int) -> float:
    usage = resource.getrusage(who)
    return usage.ru_utime + usage.ru_stime


def _client_threads() -> dict[int, float]:
    """CPU seconds of each of this process's librdkafka threads (named ``rdk:...``)."""
    found: dict[int, float] = {}
    for tid in os.listdir("/proc/self/task"):
        with contextlib.suppress(OSError):
            if Path(f"/proc/self/task/{tid}/comm").read_text().startswith("rdk:"):
                found[int(tid)] = _cpu_of("self", f"/task/{tid}")
    return found


class CpuMeter:
    """The CPU seconds of one run (see the module docstring): ``process`` (every thread of
    this process), ``workers`` (its child processes from ``started()`` on) and ``client``
    (librdkafka's threads, already in ``process``). Threads and workers are looked at every
    :data:`METER_INTERVAL_S`; the CPU of this process and of its reaped children is exact."""

    def __init__(self, started: Callable[[], bool]) -> None:
        self._started = started
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="stage-costs-meter", daemon=True)
        self._first: dict[int, float] = {}
        self._last: dict[int, float] = {}
        self._workers_before: dict[int, float] | None = None
        self.process = self.workers = self.client = 0.0

    def __enter__(self) -> CpuMeter:
        self._first = _client_threads()
        self._last = dict(self._first)
        self._process, self._children = _cpu(resource.RUSAGE_SELF), _cpu(resource.RUSAGE_CHILDREN)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._done.set()
        self._thread.join()
        self._last.update(_client_threads())
        self.process = _cpu(resource.RUSAGE_SELF) - self._process
        children = _cpu(resource.RUSAGE_CHILDREN) - self._children
        # Only reaped children are in RUSAGE_CHILDREN (workers, not a resource tracker).
        before = self._workers_before or {}
        reaped = sum(cpu for pid, cpu in before.items() if not Path(f"/proc/{pid}").exists())
        self.workers = max(0.0, children - reaped)
        self.client = sum(last - self._first.get(tid, 0.0) for tid, last in self._last.items())

    def _watch(self) -> None:
        while not self._done.wait(METER_INTERVAL_S):
            self._last.update(_client_threads())
            if self._workers_before is None:
                # Not psutil's children(): it reads every process of the machine (~3 ms).
                workers = [p.pid for p in multiprocessing.active_children() if p.pid]
                if workers and self._started():
                    self._workers_before = {pid: _cpu_of(pid) for pid in workers}


def _cpu_of(pid: int | str, task: str = "") -> float:
    """CPU seconds of a process (or one of its threads, ``task``), from ``/proc``; 0 if gone."""
    try:
        stat = Path(f"/proc/{pid}{task}/stat").read_text()
    except OSError:
        return 0.0
    fields = stat.rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
