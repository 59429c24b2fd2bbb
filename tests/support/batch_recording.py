"""Batch handlers for end-to-end tests that record every call, from any engine, to files.

Each call appends one JSON line to ``<dir>/batches-<pid>.jsonl``: its start and end
(``time.monotonic()``, comparable across processes on one machine) and the messages of the
batch as ``[partition, key, offset]``. A message whose value is ``b"fail"`` makes
:func:`handle` raise (for the whole batch) and :func:`handle_outcomes` report it failed
alone; any other value is ignored. Module-level functions, so process-engine workers can
import them.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path

from recording import RECORD_DIR

import laneway
from laneway.types import Message

WORK_S = 0.001
"""Seconds each call takes (so concurrent calls really overlap)."""


@dataclass(frozen=True)
class BatchCall:
    start: float
    end: float
    items: list[tuple[int, str, int]]
    """``(partition, key, offset)`` of each message, in the batch's order."""


def _write(batch: Sequence[Message], start: float) -> None:
    items = [[m.partition, "-" if m.key is None else m.key.hex(), m.offset] for m in batch]
    line = json.dumps({"start": start, "end": time.monotonic(), "items": items})
    path = Path(os.environ[RECORD_DIR]) / f"batches-{os.getpid()}.jsonl"
    with path.open("a") as out:
        out.write(line + "\n")


def _refuse(batch: Sequence[Message]) -> None:
    bad = [m.offset for m in batch if m.value == b"fail"]
    if bad:
        raise ValueError(f"refused offsets {bad}")


def handle(batch: list[Message]) -> None:
    start = time.monotonic()
    time.sleep(WORK_S)
    _refuse(batch)
    _write(batch, start)


async def handle_async(batch: list[Message]) -> None:
    start = time.monotonic()
    await asyncio.sleep(WORK_S)
    _refuse(batch)
    _write(batch, start)


def handle_outcomes(batch: list[Message]) -> laneway.Outcomes:
    start = time.monotonic()
    _write(batch, start)
    return laneway.Outcomes(
        [ValueError(f"refused {m.offset}") if m.value == b"fail" else None for m in batch]
    )


async def handle_outcomes_async(batch: list[Message]) -> laneway.Outcomes:
    return handle_outcomes(batch)


def produce_results(batch: list[Message]) -> list[laneway.Produce]:
    """One result per message into ``<topic>.out``, keyed like its input."""
    start = time.monotonic()
    _write(batch, start)
    return [laneway.Produce(f"{m.topic}.out", m.value, m.key) for m in batch]


async def produce_results_async(batch: list[Message]) -> list[laneway.Produce]:
    return produce_results(batch)


def read_batches(directory: Path) -> list[BatchCall]:
    calls = []
    for path in directory.glob("batches-*.jsonl"):
        for line in path.read_text().splitlines():
            data = json.loads(line)
            items = [(p, k, o) for p, k, o in data["items"]]
            calls.append(BatchCall(data["start"], data["end"], items))
    return calls


def lane_violations(calls: list[BatchCall], ordering: str) -> list[str]:
    """Lanes in two overlapping batches, or whose messages ran out of offset order (within
    a batch, and from batch to batch in start order)."""
    if ordering == "unordered":
        return []
    lanes: dict[tuple[int, str], list[tuple[BatchCall, list[int]]]] = defaultdict(list)
    for call in calls:
        parts: dict[tuple[int, str], list[int]] = defaultdict(list)
        for partition, key, offset in call.items:
            parts[(partition, key if ordering == "key" else "")].append(offset)
        for lane, offsets in parts.items():
            lanes[lane].append((call, offsets))
    problems = []
    for lane, runs in lanes.items():
        runs.sort(key=lambda run: run[0].start)
        for _call, offsets in runs:
            if offsets != sorted(offsets):
                problems.append(f"{lane}: out of order within a batch: {offsets}")
        for (before, first), (after, second) in pairwise(runs):
            if second[0] <= first[-1]:
                problems.append(f"{lane}: offsets {second} started after {first}")
            if after.start < before.end:
                problems.append(f"{lane}: in two overlapping batches: {first} and {second}")
    return problems
