"""ConsumerStats: the snapshot ``Consumer.stats()`` returns, and the latency window behind it."""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field

from laneway.types import Message, PartitionId, Stall


@dataclass(frozen=True)
class ConsumerStats:
    """A point-in-time snapshot of a consumer.

    ``processed``: messages whose handler finished; ``failed``: messages whose handler
    raised on its last attempt (or whose key's circuit was open), once settled;
    ``dead_lettered``: those written to the dead-letter topic; ``skipped``: messages
    fetched again but already finished before (restored from commit metadata);
    ``fenced``: completions discarded because their partition was no longer owned;
    ``in_flight``: handlers running now;
    ``buffered``: fetched but unfinished messages (bounded by ``max_buffered``);
    ``buffered_bytes``: their values, keys and headers in bytes (bounded by
    ``max_buffered_bytes``);
    ``committed``: last committed offset per partition; ``elapsed``: seconds from the
    first fetch to now, or to the last message settled once the run ended (an
    ``idle_timeout`` wait at the end is not counted); ``throughput``:
    handled messages per second over ``elapsed``; ``latency_ms``: percentiles (p50, p95,
    p99, max) of produce timestamp -> handler finished over the most recent messages;
    ``worker_restarts``: process-engine workers replaced after they died;
    ``rebalances``: partition ownership changes (assignments, revocations, losses);
    ``oldest_in_flight``: seconds the longest-running message has been in its handler
    (0: none running); ``stalled``: the messages running longer than ``stall_timeout``
    (each a :class:`~laneway.types.Stall`). Both as of the stall watch's latest
    look, at most about a second old. ``concurrency_limit``: with
    ``concurrency_limit="adaptive"``, how many handlers may run at once now (else None).
    ``abandoned``: messages a shutdown left unfinished because its drain ended first
    (``drain_timeout`` expired, a second signal, or ``stop(drain=False)``): still in
    their handler, queued for a worker, or waiting for their dead letter or results. Their
    offsets stay uncommitted, so they run again after a restart; 0 after a clean drain
    (``laneway run`` then exits 0, else 7). ``deserialization_failures``: records whose
    key or value the consumer's deserializer could not decode (see :mod:`laneway.serde`):
    dead-lettered without calling the handler, and counted in ``failed`` too once settled.
    """

    processed: int = 0
    failed: int = 0
    dead_lettered: int = 0
    skipped: int = 0
    fenced: int = 0
    in_flight: int = 0
    buffered: int = 0
    buffered_bytes: int = 0
    paused: bool = False
    commits: int = 0
    committed: Mapping[PartitionId, int] = field(default_factory=dict)
    assigned: tuple[PartitionId, ...] = ()
    elapsed: float = 0.0
    throughput: float = 0.0
    latency_ms: Mapping[str, float] = field(default_factory=dict)
    worker_restarts: int = 0
    rebalances: int = 0
    oldest_in_flight: float = 0.0
    stalled: tuple[Stall, ...] = ()
    concurrency_limit: int | None = None
    abandoned: int = 0
    deserialization_failures: int = 0

    @property
    def handled(self) -> int:
        """Messages the consumer is done with: processed plus failed."""
        return self.processed + self.failed


class LatencyWindow:
    """The end-to-end latency of the most recent ``size`` messages, for percentiles.

    Recording samples every ``STRIDE``-th message of each completion batch, in bulk:
    percentiles need a fair sample, not every message, and this runs on the hot path.
    """

    STRIDE = 8

    def __init__(self, size: int = 8_192) -> None:
        self._samples: deque[float] = deque(maxlen=size)

    def record(self, messages: list[Message]) -> None:
        now = time.time() * 1000.0
        self._samples.extend([now - m.timestamp for m in messages[:: self.STRIDE]])

    def percentiles(self) -> dict[str, float]:
        samples = sorted(self._samples)
        if not samples:
            return {}
        last = len(samples) - 1
        return {
            "p50": samples[last * 50 // 100],
            "p95": samples[last * 95 // 100],
            "p99": samples[last * 99 // 100],
            "max": samples[last],
        }
