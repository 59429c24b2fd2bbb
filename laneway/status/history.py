"""StatusHistory: the last minutes of a consumer's backlog and counters, for the status
page's trends (done/s, time to clear, the backlog chart) and rates."""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

from laneway.control.backlog import Backlog
from laneway.stats import ConsumerStats
from laneway.types import PartitionId

SAMPLE_EVERY = 1.0
"""Seconds between two samples."""
KEPT_SECONDS = 300
"""Seconds of samples kept: the backlog chart's span."""
RATE_SECONDS = 10.0
"""Seconds the rates (processed, failed, dead letters, done per partition) cover."""
TREND_SECONDS = 60.0
"""Seconds the backlog's trend (its change per second) covers."""
SERIES_POINTS = 60
"""Points of each partition's backlog series (the whole kept span, thinned)."""


@dataclass(frozen=True)
class Sample:
    """One look at the consumer: when (``at``: wall clock, ``clock``: monotonic), its
    backlog, and its counters of messages processed, failed and dead-lettered."""

    at: float
    clock: float
    backlog: Backlog
    processed: int
    failed: int
    dead_lettered: int

    def done(self) -> dict[PartitionId, int]:
        """Per partition, the offsets below the log end that are finished: it grows by
        what the consumer finishes there."""
        return {(p.topic, p.partition): p.end - p.backlog for p in self.backlog.partitions}


@dataclass(frozen=True)
class PartitionTrend:
    """How a partition's backlog moves: ``done_rate`` (messages finished per second over
    :data:`RATE_SECONDS`), ``trend`` (the backlog's change per second over
    :data:`TREND_SECONDS`: above 0 it grows) and ``time_to_clear`` (its backlog over its
    own done rate; ``None``: nothing left, or nothing finished to estimate from)."""

    done_rate: float
    trend: float
    time_to_clear: float | None


class StatusHistory:
    """Samples ``backlog()`` and ``stats()`` of one consumer every :data:`SAMPLE_EVERY`
    seconds from a thread of its own (:meth:`start`, :meth:`stop`) and keeps the last
    :data:`KEPT_SECONDS` of them, so that a page opened during an incident shows the
    minutes before it. Reading is safe from any thread.

    Cost: a sample is one ``stats()`` and one ``backlog()`` call a second (about a
    millisecond; nothing on the consumer's hot path). Tuning: none.
    """

    def __init__(
        self,
        backlog: Callable[[], Backlog],
        stats: Callable[[], ConsumerStats],
        kept: int = KEPT_SECONDS,
    ) -> None:
        self._backlog = backlog
        self._stats = stats
        self._samples: deque[Sample] = deque(maxlen=kept)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self.sample()
        self._thread = threading.Thread(target=self._run, name="laneway-status", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(5.0)

    def sample(self, clock: float | None = None) -> Sample:
        """Take a sample now (``clock``: the monotonic time to file it under)."""
        stats = self._stats()
        taken = Sample(
            time.time(),
            time.monotonic() if clock is None else clock,
            self._backlog(),
            stats.processed,
            stats.failed,
            stats.dead_lettered,
        )
        self._samples.append(taken)
        return taken

    def samples(self) -> list[Sample]:
        """The samples kept, oldest first."""
        return list(self._samples)

    def rates(self) -> dict[str, float]:
        """Messages processed, failed and dead-lettered per second over the last
        :data:`RATE_SECONDS`."""
        first, last = _span(self.samples(), RATE_SECONDS)
        if first is None or last is None:
            return {"processed": 0.0, "failed": 0.0, "dead_lettered": 0.0}
        seconds = last.clock - first.clock
        return {
            "processed": (last.processed - first.processed) / seconds,
            "failed": (last.failed - first.failed) / seconds,
            "dead_lettered": (last.dead_lettered - first.dead_lettered) / seconds,
        }

    def trends(self) -> dict[PartitionId, PartitionTrend]:
        """The :class:`PartitionTrend` of each partition in the latest sample, each from
        the oldest sample in the window that has it (a partition assigned a moment ago
        has a short window)."""
        samples = self.samples()
        if not samples:
            return {}
        latest = samples[-1]
        done_now = latest.done()
        done_then = _earliest(samples, RATE_SECONDS, Sample.done)
        backlog_then = _earliest(samples, TREND_SECONDS, _backlogs)
        found = {}
        for pid, backlog in _backlogs(latest).items():
            done_rate = trend = 0.0
            if pid in done_then:
                clock, done = done_then[pid]
                done_rate = max(0, done_now[pid] - done) / (latest.clock - clock)
            if pid in backlog_then:
                clock, before = backlog_then[pid]
                trend = (backlog - before) / (latest.clock - clock)
            clear = None
            if backlog == 0:
                clear = 0.0
            elif done_rate > 0:
                clear = backlog / done_rate
            found[pid] = PartitionTrend(done_rate, trend, clear)
        return found

    def series(self) -> dict[str, list[float]]:
        """The kept span as chart data: seconds before the latest sample (``ago``), and
        the backlog and lag summed over the owned partitions."""
        samples = self.samples()
        if not samples:
            return {"ago": [], "backlog": [], "lag": []}
        last = samples[-1].clock
        return {
            "ago": [round(last - s.clock, 1) for s in samples],
            "backlog": [float(s.backlog.backlog or 0) for s in samples],
            "lag": [float(s.backlog.lag or 0) for s in samples],
        }

    def partition_series(self) -> dict[PartitionId, list[int]]:
        """Each partition's backlog over the kept span, at most :data:`SERIES_POINTS`
        values (oldest first; a partition not owned at a sample has no value for it)."""
        samples = self.samples()
        step = max(1, -(-len(samples) // SERIES_POINTS))
        thinned = samples[::-1][::step][::-1]
        found: dict[PartitionId, list[int]] = {}
        for sample in thinned:
            for pid, backlog in _backlogs(sample).items():
                found.setdefault(pid, []).append(backlog)
        return found

    def _run(self) -> None:
        while not self._stop.wait(SAMPLE_EVERY):
            self.sample()


def _backlogs(sample: Sample) -> dict[PartitionId, int]:
    return {(p.topic, p.partition): p.backlog for p in sample.backlog.partitions}


def _earliest(
    samples: list[Sample], seconds: float, figures: Callable[[Sample], dict[PartitionId, int]]
) -> dict[PartitionId, tuple[float, int]]:
    """Per partition, the clock and figure of the oldest sample before the latest one and
    at most ``seconds`` older that has the partition."""
    latest = samples[-1].clock
    found: dict[PartitionId, tuple[float, int]] = {}
    for sample in samples[:-1]:
        if latest - sample.clock <= seconds:
            for pid, figure in figures(sample).items():
                found.setdefault(pid, (sample.clock, figure))
    return found


def _span(samples: list[Sample], seconds: float) -> tuple[Sample | None, Sample | None]:
    """The oldest sample at most ``seconds`` before the latest one, and the latest (two
    ``None`` when there are not two samples apart in time)."""
    if len(samples) < 2:
        return None, None
    last = samples[-1]
    first = next((s for s in samples if last.clock - s.clock <= seconds), last)
    if first is last:
        first = samples[-2]
    if last.clock <= first.clock:
        return None, None
    return first, last
