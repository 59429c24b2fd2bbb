"""Correctness and latency figures computed from a run's records.

Correctness (:func:`check`):

* ``lost`` = produced - distinct sequence numbers handled; ``duplicates`` = handled -
  distinct (a message run twice).
* ordering: the records are grouped into lanes — ``(partition, key)`` for ``key``,
  ``partition`` for ``partition`` — and, in the order the handlers *started*, each lane's
  offsets must strictly increase and each handler must start no earlier than the previous
  one of its lane ended (no overlap). ``unordered`` promises nothing: ``n/a``.

Latency (:func:`latency`): produce timestamp -> handler finished, in an HdrHistogram
(microsecond units, 3 significant digits), and the mean handler time (start -> end). The
end is a ``CLOCK_MONOTONIC`` reading turned into wall-clock time with one offset measured
here, since the produce timestamp is wall-clock milliseconds.
"""

from __future__ import annotations

import time
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from itertools import pairwise

from hdrh.histogram import HdrHistogram

from laneway.bench.engines.recorder import Record

PASS, FAIL, NOT_APPLICABLE = "PASS", "FAIL", "n/a"
CDF_PERCENTILES = (0.0, 1.0, *(2.5 * i for i in range(1, 40)), 99.0, 99.5, 99.9, 100.0)
_HIGHEST_US = 3_600_000_000


@dataclass(frozen=True)
class Correctness:
    """Was every produced message handled exactly once, in order within its lane?"""

    handled: int
    distinct: int
    lost: int
    duplicates: int
    ordering: str
    violation: str | None = None


@dataclass(frozen=True)
class Latency:
    """End-to-end latency percentiles (ms), mean handler time (ms) and the CDF points."""

    avg_ms: float
    p50_ms: float
    p95_ms: float
    p99_ms: float
    max_ms: float
    handler_avg_ms: float
    cdf: tuple[tuple[float, float], ...]


def check(records: Sequence[Record], produced: int, ordering: str) -> Correctness:
    """Lost, duplicates and the ordering verdict for ``records`` of ``produced`` messages."""
    distinct = len({r[3] for r in records})
    lost = produced - distinct
    duplicates = len(records) - distinct
    if ordering == "unordered":
        return Correctness(len(records), distinct, lost, duplicates, NOT_APPLICABLE)
    violation = _first_violation(records, by_key=ordering == "key")
    verdict = PASS if violation is None else FAIL
    return Correctness(len(records), distinct, lost, duplicates, verdict, violation)


def counted(count: int, produced: int) -> Correctness:
    """What a count alone says of ``count`` messages read out of ``produced``: none lost
    when they match, no order verdict (a loop that keeps no records cannot tell)."""
    return Correctness(
        count, min(count, produced), max(0, produced - count), max(0, count - produced),
        NOT_APPLICABLE,
    )  # fmt: skip


def _first_violation(records: Sequence[Record], by_key: bool) -> str | None:
    lanes: dict[Hashable, list[Record]] = {}
    for r in records:
        lane: Hashable = (r[0], r[1]) if by_key else r[0]
        bucket = lanes.get(lane)
        if bucket is None:
            lanes[lane] = [r]
        else:
            bucket.append(r)
    for lane, runs in lanes.items():
        runs.sort(key=lambda r: (r[5], r[6]))
        for before, after in pairwise(runs):
            if after[2] <= before[2]:
                return f"lane {lane!r}: offset {after[2]} ran after offset {before[2]}"
            if after[5] < before[6]:
                return f"lane {lane!r}: offsets {before[2]} and {after[2]} overlapped"
    return None


def latency(records: Sequence[Record]) -> Latency | None:
    """Latency figures of ``records`` (``None`` when there are none)."""
    if not records:
        return None
    offset_us = (time.time_ns() - time.monotonic_ns()) / 1000.0
    histogram = HdrHistogram(1, _HIGHEST_US, 3)
    handler_ns = 0
    for r in records:
        end_us = r[6] / 1000.0 + offset_us
        histogram.record_value(min(max(1, int(end_us - r[4] * 1000.0)), _HIGHEST_US))
        handler_ns += r[6] - r[5]
    at = histogram.get_value_at_percentile
    cdf = tuple((p, at(p) / 1000.0) for p in CDF_PERCENTILES)
    return Latency(
        avg_ms=histogram.get_mean_value() / 1000.0,
        p50_ms=at(50) / 1000.0,
        p95_ms=at(95) / 1000.0,
        p99_ms=at(99) / 1000.0,
        max_ms=histogram.get_max_value() / 1000.0,
        handler_avg_ms=handler_ns / len(records) / 1_000_000.0,
        cdf=cdf,
    )
