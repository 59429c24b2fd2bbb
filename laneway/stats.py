"""ConsumerStats: the snapshot ``Consumer.stats()`` returns, and the latency window behind it."""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from laneway.types import (
    Failure,
    Header,
    HotKey,
    Message,
    NotDurable,
    PartitionId,
    Restore,
    Stall,
)

REBALANCES_KEPT = 32
"""Ownership changes a consumer remembers for ``stats().rebalances_seen``."""
FAILURES_KEPT = 20
"""Messages given up on a consumer remembers for ``stats().recent_failures``."""
TRACEPARENT = "traceparent"
"""The W3C trace context header whose trace id a :class:`FailureNote` keeps."""


@dataclass(frozen=True)
class Rebalance:
    """One change of the partitions a consumer owns: ``kind`` is ``assigned``,
    ``revoked`` or ``lost`` (taken away without a chance to commit), ``at`` the wall-clock
    time (``time.time()``)."""

    at: float
    kind: str
    partitions: tuple[PartitionId, ...]


@dataclass(frozen=True)
class FailureNote:
    """A message given up on after its last attempt, as the status page lists it: its
    position, the error's type and message (the first :data:`ERROR_TEXT_KEPT`
    characters), the ``attempts`` made, the ``trace_id`` of the ``traceparent`` header it
    came with (``None``: none), where it went (``outcome``, e.g. ``dead-lettered to
    orders.dlq``) and when (``at``, ``time.time()``). Never its key or value."""

    at: float
    topic: str
    partition: int
    offset: int
    error_type: str
    error_message: str
    attempts: int
    trace_id: str | None
    outcome: str

    @classmethod
    def of(cls, failure: Failure, outcome: str, at: float) -> FailureNote:
        m = failure.message
        return cls(
            at,
            m.topic,
            m.partition,
            m.offset,
            failure.error_type,
            failure.error_message[:ERROR_TEXT_KEPT],
            failure.attempts,
            _trace_id(m.headers),
            outcome,
        )


ERROR_TEXT_KEPT = 500
"""Characters of an error message a :class:`FailureNote` keeps."""


def _trace_id(headers: Sequence[Header]) -> str | None:
    """The trace id of a well-formed W3C ``traceparent`` header (version-trace-span-flags)."""
    for name, value in headers:
        if name == TRACEPARENT and value is not None:
            parts = bytes(value).split(b"-")
            if len(parts) == 4 and len(parts[1]) == 32:
                text = parts[1].decode("ascii", "replace").lower()
                if all(c in "0123456789abcdef" for c in text) and text != "0" * 32:
                    return text
    return None


@dataclass(frozen=True)
class ConsumerStats:
    """A point-in-time snapshot of a consumer.

    ``processed``: messages whose handler finished; ``failed``: messages whose handler
    raised on its last attempt (or whose key's circuit was open), once settled;
    ``dead_lettered``: those written to the dead-letter topic; ``skipped``: messages
    fetched again but already finished before (restored from commit metadata);
    ``fenced``: completions discarded because their partition was no longer owned;
    ``deleted_unread``: records deleted from the log (retention, DeleteRecords) before
    this consumer read them, so never processed (each such loss is also a WARNING);
    ``in_flight``: handlers running now;
    ``buffered``: fetched but unfinished messages (bounded by ``max_buffered``);
    ``buffered_bytes``: their values, keys and headers in bytes (bounded by
    ``max_buffered_bytes``);
    ``committed``: last committed offset per partition; ``elapsed``: seconds from the
    first fetch to now, or to the last message settled once the run ended (an
    ``idle_timeout`` wait at the end is not counted); ``throughput``:
    handled messages per second over ``elapsed``; ``latency_ms``: percentiles (p50, p95,
    p99, max) of produce timestamp -> handler finished over the most recent messages;
    ``worker_restarts``: process-engine workers replaced (they died, timed out, or were
    detached from a call that ran too long);
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

    For the status page (and anyone watching): ``oldest_by_partition``, the age of each
    partition's oldest running message (as ``oldest_in_flight``, per partition);
    ``paused_partitions``, the owned partitions paused for backpressure now;
    ``worker_pids``, the process engine's worker processes (0: one being replaced; empty
    for the other engines); ``rebalances_seen``, the latest ownership changes (each a
    :class:`Rebalance`, the last :data:`REBALANCES_KEPT`); ``recent_failures``, the latest
    messages given up on (each a :class:`FailureNote`, the last :data:`FAILURES_KEPT`;
    never a key or value).

    Under skew: ``hot_keys``, the keys holding most of the buffer (each a
    :class:`~laneway.types.HotKey`, the ten hottest, at most about a second old;
    ``ordering="key"`` on the thread, async and process engines); ``held_off``, messages
    not kept so far because their key was at ``max_buffered_per_key`` (read again later).

    With ``state=``: ``restoring``, the partitions whose state is being restored from the
    changelog now (each a :class:`~laneway.types.Restore`: records read of those to read;
    their messages wait, the other partitions run); empty without a store and once every
    owned partition is restored. ``not_durable``, the partitions whose state changes have
    failed to reach the changelog for 30 s or more (each a :class:`~laneway.types.NotDurable`;
    kept in memory, nothing of them committed until the changelog takes them).
    """

    processed: int = 0
    failed: int = 0
    dead_lettered: int = 0
    skipped: int = 0
    fenced: int = 0
    deleted_unread: int = 0
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
    oldest_by_partition: Mapping[PartitionId, float] = field(default_factory=dict)
    paused_partitions: tuple[PartitionId, ...] = ()
    worker_pids: tuple[int, ...] = ()
    rebalances_seen: tuple[Rebalance, ...] = ()
    recent_failures: tuple[FailureNote, ...] = ()
    hot_keys: tuple[HotKey, ...] = ()
    held_off: int = 0
    restoring: tuple[Restore, ...] = ()
    not_durable: tuple[NotDurable, ...] = ()

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
