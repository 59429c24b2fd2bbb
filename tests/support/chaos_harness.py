"""The parent's side of the chaos tests: start, kill and stop ``chaos_child`` consumers,
watch their progress, and check what they recorded against the contract.

What a chaos run must show (see :func:`check_run`):

* nothing lost: every offset below the log end was handled at least once;
* per-lane order inside one life (one consumer process, or one process-engine worker):
  a key's messages never overlapped and started in offset order;
* committed work is never done again: a message a life handled was not committed, as
  of the position (offset and commit metadata) that life was assigned, for its partition;
* confirmed commits are durable: a life is never assigned a position below one an
  earlier life saw confirmed;
* duplicates therefore come only from work not committed when a life ended; they are
  counted per ended life (:attr:`RunReport.duplicates`) and bounded by it.

:func:`run_bounded` runs a consumer in the test's own process with the same rule as every
wait here: bounded in time, failing the test rather than hanging it.
"""

from __future__ import annotations

import functools
import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil
import pytest
import recording
from chaos_child import LifeEvent, read_life

import laneway
from laneway.offsets.codec import decode

CHILD = Path(__file__).resolve().parent / "chaos_child.py"
Position = tuple[int, str] | None

CLASSIC_GROUP: dict[str, object] = {
    "group.protocol": "classic",
    "session.timeout.ms": 6_000,
    "heartbeat.interval.ms": 500,
}
"""The classic protocol, on request, with a short session (the broker's minimum) and
heartbeat: a member that leaves or dies is noticed in seconds."""
CONSUMER_GROUP: dict[str, object] = {"group.protocol": "consumer"}
"""KIP-848 (laneway's default, named here to be sure): the broker assigns partitions;
session (45 s) and heartbeat interval (5 s) are broker settings, and librdkafka refuses
``session.timeout.ms``, ``heartbeat.interval.ms`` and ``partition.assignment.strategy``
on the client."""
PROTOCOLS = ("classic", "consumer")
"""The rebalance protocols a chaos test runs under (``group.protocol``)."""


def group_config(protocol: str, **extra: object) -> dict[str, object]:
    """The librdkafka settings of a test group under ``protocol``, plus ``extra``."""
    base = CLASSIC_GROUP if protocol == "classic" else CONSUMER_GROUP
    return {**base, **extra}


class ChildProcess:
    """One ``chaos_child`` consumer process (one *life*), recording into ``record_dir``."""

    def __init__(self, settings: dict[str, Any], record_dir: Path) -> None:
        self.record_dir = record_dir
        env = {**os.environ, recording.RECORD_DIR: str(record_dir)}
        self.process = subprocess.Popen([sys.executable, str(CHILD), json.dumps(settings)], env=env)
        self.pid = self.process.pid

    def alive(self) -> bool:
        return self.process.poll() is None

    def events(self) -> list[LifeEvent]:
        path = self.record_dir / f"life-{self.pid}.jsonl"
        return read_life(path) if path.exists() else []

    def started(self) -> bool:
        """Whether its consumer exists (from then on a SIGTERM is a graceful stop)."""
        return any(e.event == "started" for e in self.events())

    def kill(self) -> None:
        """SIGKILL: no drain, no commit, no leave-group."""
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(timeout=30)

    def terminate(self, timeout: float = 60.0) -> int:
        """SIGTERM (the graceful stop) and wait for the exit code."""
        self.process.send_signal(signal.SIGTERM)
        return self.wait(timeout)

    def wait(self, timeout: float) -> int:
        """Wait for the exit code; on a hang, dump the child's threads (stderr) and kill it."""
        try:
            return self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.process.send_signal(signal.SIGUSR1)
            time.sleep(1.0)
            self.process.kill()
            self.process.wait(timeout=30)
            raise

    def stats(self) -> dict[str, Any]:
        data: dict[str, Any] = json.loads((self.record_dir / f"stats-{self.pid}.json").read_text())
        return data


class Progress:
    """Counts recorded handler calls in ``record_dir`` cheaply, reading only new bytes."""

    def __init__(self, record_dir: Path) -> None:
        self._dir = record_dir
        self._read: dict[Path, tuple[int, int]] = {}  # path -> (bytes read, lines)

    def calls(self) -> int:
        total = 0
        for path in self._dir.glob("*.log"):
            done, lines = self._read.get(path, (0, 0))
            with path.open("rb") as handle:
                handle.seek(done)
                chunk = handle.read()
            lines += chunk.count(b"\n")
            self._read[path] = (done + len(chunk), lines)
            total += lines
        return total


def chaos_seed() -> int:
    """A random seed for a chaos run, printed; ``LANEWAY_CHAOS_SEED`` fixes it."""
    seed = int(os.environ.get("LANEWAY_CHAOS_SEED") or random.randrange(2**32))
    print(f"chaos seed {seed} (LANEWAY_CHAOS_SEED={seed} replays it)")
    return seed


def spawned_children(pid: int) -> set[int]:
    """The live children of process ``pid`` that multiprocessing spawned (process-engine
    workers; not its resource tracker)."""
    children = set()
    for child in psutil.Process(pid).children():
        try:
            if any("spawn_main" in part for part in child.cmdline()):
                children.add(child.pid)
        except psutil.NoSuchProcess:
            continue
    return children


def wait_until(condition: Callable[[], bool], timeout: float, interval: float = 0.01) -> bool:
    """Poll ``condition`` until it holds (True) or ``timeout`` seconds passed (False)."""
    deadline = time.monotonic() + timeout
    for _ in range(int(timeout / interval) + 1):
        if condition():
            return True
        if time.monotonic() > deadline:
            break
        time.sleep(interval)
    return condition()


def run_bounded(
    consumer: laneway.Consumer, messages: int, limit: float = 20.0
) -> laneway.ConsumerStats:
    """``run(max_messages)`` in this process, failing the test instead of hanging it when
    the consumer stalls for ``limit`` seconds."""
    outcome: list[laneway.ConsumerStats | BaseException] = []

    def run() -> None:
        try:
            outcome.append(consumer.run(max_messages=messages, idle_timeout=limit))
        except BaseException as error:
            outcome.append(error)

    runner = threading.Thread(target=run, daemon=True)
    runner.start()
    runner.join(limit)
    if runner.is_alive():
        consumer.stop()
        runner.join(30.0)
        pytest.fail(f"the consumer stalled: {consumer.stats()}")
    [result] = outcome
    if isinstance(result, BaseException):
        raise result
    return result


def committed_set(position: Position, offset: int) -> bool:
    """Whether ``offset`` is committed as of ``position`` (below it, or in its metadata)."""
    if position is None:
        return False
    committed, metadata = position
    return offset < committed or offset in _finished_beyond(metadata, committed)


@functools.lru_cache(maxsize=4096)
def _finished_beyond(metadata: str, committed: int) -> frozenset[int]:
    return decode(metadata, committed)


@dataclass
class RunReport:
    """What a chaos run measured; ``problems`` lists every broken rule (empty: all held)."""

    calls: int = 0
    distinct: int = 0
    duplicates: dict[int, int] = field(default_factory=dict)
    """Per consumer life (pid, in start order): messages it handled that a later life
    handled again. The last life's count is always 0."""
    late: dict[int, int] = field(default_factory=dict)
    """Per consumer life: handler calls that ended after its last confirmed commit began
    (all of them if it never had a commit confirmed)."""
    problems: list[str] = field(default_factory=list)

    @property
    def total_duplicates(self) -> int:
        """Handler calls beyond the first per message (across and within lives)."""
        return self.calls - self.distinct


def check_run(
    record_dir: Path,
    ends: dict[int, int],
    lives: list[int],
    max_buffered: int,
    ordering: str = "key",
    order_by: str = "life",
) -> RunReport:
    """Check the recordings of consumer processes ``lives`` (pids, in start order).

    ``ends``: the log end offset per partition. ``order_by="life"`` checks lane order per
    consumer process; ``"worker"`` per recording pid (one process-engine worker's life).

    Duplicates of a life are bounded by what was unfinished at its end: the calls that
    ended after its last confirmed commit was taken, plus what its engine still held when
    that commit was taken (fetched but unreported: at most ``max_buffered``).
    """
    calls = recording.read_calls(record_dir)
    report = RunReport(calls=len(calls))
    handled = {(c.partition, c.offset) for c in calls}
    report.distinct = len(handled)
    lost = [(p, o) for p, end in ends.items() for o in range(end) if (p, o) not in handled]
    if lost:
        report.problems.append(f"{len(lost)} messages never handled, e.g. {lost[:5]}")
    extra = [(p, o) for p, o in handled if o >= ends.get(p, 0)]
    if extra:
        report.problems.append(f"handled offsets beyond the log end: {extra[:5]}")

    events = {pid: read_life(record_dir / f"life-{pid}.jsonl") for pid in lives}
    life_of = _life_of_calls(calls, lives, events)
    owners: dict[int, list[recording.Call]] = defaultdict(list)
    for call in calls:
        owners[call.pid if order_by == "worker" else life_of[call]].append(call)
    for owner, owned in owners.items():
        for problem in recording.order_violations(owned, ordering)[:5]:
            report.problems.append(f"order broken within life {owner}: {problem}")

    _check_positions(calls, life_of, events, report)
    handled_by: dict[int, set[tuple[int, int]]] = defaultdict(set)
    for call in calls:
        handled_by[life_of[call]].add((call.partition, call.offset))
    for index, pid in enumerate(lives):
        later: set[tuple[int, int]] = set().union(*(handled_by[p] for p in lives[index + 1 :]))
        report.duplicates[pid] = len(handled_by[pid] & later)
        taken = _last_confirmed_commit(events[pid])
        report.late[pid] = sum(1 for c in calls if life_of[c] == pid and c.end > taken)
        if report.duplicates[pid] > report.late[pid] + max_buffered:
            report.problems.append(
                f"life {pid}: {report.duplicates[pid]} duplicates, more than the "
                f"{report.late[pid]} calls after its last commit + max_buffered={max_buffered}"
            )
    return report


def _last_confirmed_commit(events: list[LifeEvent]) -> float:
    """When the last commit a life saw confirmed was sent (-inf: none was)."""
    sent = taken = float("-inf")
    for event in events:
        if event.event == "commit":
            sent = event.time
        elif event.event == "committed":
            taken = sent
    return taken


def _life_of_calls(
    calls: list[recording.Call], lives: list[int], events: dict[int, list[LifeEvent]]
) -> dict[recording.Call, int]:
    """The consumer life each call belongs to: its recording pid, or for a process-engine
    worker (a pid that is no life) the latest life started before the call."""
    starts = sorted((min(e.time for e in events[pid]), pid) for pid in lives if events[pid])
    life_of = {}
    for call in calls:
        if call.pid in events:
            life_of[call] = call.pid
        else:
            running = [pid for start, pid in starts if start <= call.start]
            life_of[call] = running[-1] if running else -1
    return life_of


def _check_positions(
    calls: list[recording.Call],
    life_of: dict[recording.Call, int],
    events: dict[int, list[LifeEvent]],
    report: RunReport,
) -> None:
    """No life re-handles what was committed when it got the partition; commits stick."""
    merged = sorted(
        ((event.time, pid, event) for pid, life in events.items() for event in life),
        key=lambda item: item[0],
    )
    assignments: dict[int, list[tuple[float, int, Position]]] = defaultdict(list)
    confirmed: dict[int, int] = {}
    for when, pid, event in merged:
        for partition, position in event.positions.items():
            if event.event == "committed" and position is not None:
                confirmed[partition] = max(confirmed.get(partition, 0), position[0])
            elif event.event == "assigned":
                assignments[pid].append((when, partition, position))
                floor = confirmed.get(partition, 0)
                if (0 if position is None else position[0]) < floor:
                    report.problems.append(
                        f"life {pid} got partition {partition} at {position}, below the "
                        f"confirmed commit {floor} of an earlier life"
                    )
    for call in calls:
        position = _position_at(assignments[life_of[call]], call.partition, call.start)
        if committed_set(position, call.offset):
            report.problems.append(
                f"life {life_of[call]} re-handled {call.partition}@{call.offset}, committed "
                f"as of its assignment {position}"
            )


def _position_at(
    assignments: list[tuple[float, int, Position]], partition: int, when: float
) -> Position:
    latest: Position = None
    for time_, p, position in assignments:
        if p == partition and time_ <= when:
            latest = position
    return latest
