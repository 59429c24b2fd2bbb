"""The true backlog of a group: its lag minus the work its commit metadata records as done.

Kafka's lag of a partition is its log end minus the group's committed offset. laneway
commits offset ``C`` only when every earlier offset is finished, and records the offsets
already finished beyond ``C`` in the commit metadata (:mod:`laneway.offsets.codec`), so a
partition whose commit point is held by one slow key shows its whole tail as lag although
most of it is done. The **backlog** is what is really left: the lag minus those finished
offsets. ``laneway lag`` and ``laneway top`` print it; a running consumer can compute the
same from its committed positions and the log ends it knows.

Nothing read from the group is trusted: a finished offset at or past the log end does not
count, nor does metadata laneway did not write or cannot decode (it counts 0).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from laneway.offsets.codec import decode_window, max_span
from laneway.types import CommitPosition, PartitionId

DECODE_LIMIT = max_span(1_048_576)
"""The furthest past the commit point a finished offset is counted (about 8.4 million):
the span a commit metadata string of 1 MiB can describe, beyond any broker's
``offset.metadata.max.bytes`` in practice; it bounds the memory a hostile string costs."""


@dataclass(frozen=True)
class PartitionBacklog:
    """One partition of a group: ``committed`` (the next offset the group will process;
    ``None`` when it never committed, and then the lag counts from ``start``, the log's
    first offset, where a new laneway group begins), ``end`` (the high watermark),
    ``lag`` (``end - committed``, never negative), ``finished_beyond`` (offsets between
    the commit and the end that the metadata records as finished), ``backlog``
    (``lag - finished_beyond``) and ``finished_runs`` (how many runs of finished offsets
    lie beyond the commit: the in-flight gaps between them are the unfinished work) and,
    as a running consumer knows it, ``first_unfinished`` (the oldest fetched offset not
    finished: the message holding the commit point; ``None``: none, or not known)."""

    topic: str
    partition: int
    committed: int | None
    end: int
    lag: int
    finished_beyond: int
    backlog: int
    finished_runs: int = 0
    first_unfinished: int | None = None

    def as_json(self) -> dict[str, object]:
        """The partition as ``laneway lag --json`` prints it (the contract's keys)."""
        return {
            "topic": self.topic,
            "partition": self.partition,
            "committed": self.committed,
            "end": self.end,
            "lag": self.lag,
            "finished_beyond": self.finished_beyond,
            "backlog": self.backlog,
        }


def partition_backlog(
    topic: str,
    partition: int,
    committed: CommitPosition | None,
    end: int,
    start: int = 0,
) -> PartitionBacklog:
    """The backlog of one partition from the group's committed position (offset and
    metadata, ``None`` if never committed), the log end and the log start.

    Finished offsets are decoded with :func:`laneway.offsets.codec.decode_window`; only
    those below ``end`` count (at most :data:`DECODE_LIMIT` past the commit).
    """
    end = max(0, end)
    if committed is None:
        lag = max(0, end - max(0, start))
        return PartitionBacklog(topic, partition, None, end, lag, 0, lag)
    lag = max(0, end - committed.offset)
    limit = min(max(0, lag - 1), DECODE_LIMIT)
    window = decode_window(committed.metadata, committed.offset, span_limit=limit) if limit else b""
    window = window[:limit]
    finished = window.count(1)
    runs = sum(1 for run in window.split(b"\x00") if run)
    return PartitionBacklog(
        topic, partition, committed.offset, end, lag, finished, lag - finished, runs
    )


@dataclass(frozen=True)
class GroupBacklog:
    """The backlog of every partition of a group (in topic, partition order), with totals.

    Build it with :func:`group_backlog`; ``as_json()`` is ``laneway lag --json``.
    """

    partitions: tuple[PartitionBacklog, ...]

    @property
    def lag(self) -> int:
        """The lag of all partitions."""
        return sum(p.lag for p in self.partitions)

    @property
    def backlog(self) -> int:
        """The backlog of all partitions."""
        return sum(p.backlog for p in self.partitions)

    @property
    def finished_beyond(self) -> int:
        """Offsets finished beyond the commit points, in all partitions."""
        return sum(p.finished_beyond for p in self.partitions)

    def as_json(self) -> dict[str, object]:
        """``{"partitions": [...], "lag": N, "backlog": N}``."""
        return {
            "partitions": [p.as_json() for p in self.partitions],
            "lag": self.lag,
            "backlog": self.backlog,
        }


def group_backlog(
    committed: Mapping[PartitionId, CommitPosition | None],
    ends: Mapping[PartitionId, int],
    starts: Mapping[PartitionId, int] | None = None,
    partitions: Iterable[PartitionId] | None = None,
) -> GroupBacklog:
    """The backlog of ``partitions`` (default: every partition in ``ends``), from the
    group's committed positions (absent or ``None``: never committed), the log ends and
    the log starts (absent: 0). A partition without a known end is left out.

    A running consumer calls it with its owned partitions' last committed positions and
    ``Source.log_ends()``; ``laneway lag`` with what the cluster reports.
    """
    chosen = sorted(set(ends if partitions is None else partitions))
    found = [
        partition_backlog(
            topic,
            number,
            committed.get((topic, number)),
            ends[(topic, number)],
            (starts or {}).get((topic, number), 0),
        )
        for topic, number in chosen
        if (topic, number) in ends
    ]
    return GroupBacklog(tuple(found))


RATE_WINDOW = 30.0
"""Seconds of work the rate behind a drain time covers: as long as KEDA's default polling
interval, so one autoscaler reading sees a whole window; a stall shows as a falling rate
at once and as a rate of 0 after this long."""
SHORTEST_SPAN = 1.0
"""The fewest seconds a drain time without a rate counts per message."""


class FinishingRate:
    """Messages finished per second over the last :data:`RATE_WINDOW` seconds of work,
    from samples ``(time, messages finished so far, backlog)``: the one estimate behind
    every drain time laneway shows (``GET /backlog``, ``laneway_drain_seconds``,
    ``laneway top``).

    A sample taken while nothing was left and nothing had finished since the one before
    (an idle consumer) starts the window afresh, so after an idle spell the rate is that
    of the burst being worked off, not the burst spread over idle seconds. Within busy
    time the window is the whole :data:`RATE_WINDOW`: a burst of completions counts for
    its share of it, so an autoscaler does not follow every burst.
    """

    def __init__(self, window: float = RATE_WINDOW) -> None:
        self._window = window
        self._samples: deque[tuple[float, int]] = deque()

    def sample(self, now: float, finished: int, backlog: int | None) -> tuple[float, float]:
        """Add a sample; the rate, and the seconds it covers."""
        samples = self._samples
        idle = backlog == 0 and bool(samples) and finished <= samples[-1][1]
        if idle:
            samples.clear()
        samples.append((now, finished))
        while len(samples) > 1 and samples[1][0] <= now - self._window:
            samples.popleft()
        since, done = samples[0]
        span = now - since
        if span <= 0:
            return 0.0, 0.0
        return max(0, finished - done) / span, span


def drain_seconds(backlog: int, rate: float, span: float) -> float:
    """The seconds to work off ``backlog`` at ``rate`` (measured over ``span`` seconds):
    ``backlog / rate``. When nothing finished in the span but a backlog is left (a stall,
    or a member that just got its partitions), ``backlog`` times the span (at least
    :data:`SHORTEST_SPAN`): the least it can be, since fewer than one message finished in
    that time; a finite number on purpose (KEDA's metrics-api scaler refuses a null and its
    Prometheus scaler reads an infinite value as 0, which would scale *in*)."""
    if backlog == 0:
        return 0.0
    if rate > 0:
        return backlog / rate
    return backlog * max(span, SHORTEST_SPAN)
