"""Every metric laneway reports, defined once, and the small protocol a backend implements.

:class:`Metric` names each metric; :data:`DEFINITIONS` says what it measures, its type,
unit, labels and (for histograms) buckets. A backend (Prometheus, OpenTelemetry, a test's
recorder) implements :class:`Metrics`; the consumer reports into it from its control
thread. :class:`NoMetrics` is the default and costs nothing: the consumer skips the work
of breaking counts down by label when it is the backend.

Label values are passed as a tuple in the order of the definition's ``labels``. A message
key is never a label (unbounded cardinality).
"""

from __future__ import annotations

import enum
from bisect import bisect_right
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Protocol


class MetricKind(str, enum.Enum):
    """How a metric's values combine: ``counter`` (only grows), ``gauge`` (a level),
    ``histogram`` (a distribution of observations, in buckets)."""

    COUNTER = "counter"
    GAUGE = "gauge"
    HISTOGRAM = "histogram"


class Metric(str, enum.Enum):
    """The name of every metric laneway reports (the Prometheus name is the value)."""

    MESSAGES_PROCESSED = "laneway_messages_processed_total"
    MESSAGES_FAILED = "laneway_messages_failed_total"
    RETRIES = "laneway_retries_total"
    DEAD_LETTERS = "laneway_dead_letters_total"
    DESERIALIZATION_FAILURES = "laneway_deserialization_failures_total"
    HANDLER_DURATION = "laneway_handler_duration_seconds"
    END_TO_END_LATENCY = "laneway_end_to_end_latency_seconds"
    IN_FLIGHT = "laneway_in_flight"
    BUFFERED = "laneway_buffered"
    PAUSED_PARTITIONS = "laneway_paused_partitions"
    COMMITTED_OFFSET = "laneway_committed_offset"
    CONSUMER_LAG = "laneway_consumer_lag"
    BACKLOG = "laneway_backlog_messages"
    DRAIN_SECONDS = "laneway_drain_seconds"
    OLDEST_UNFINISHED = "laneway_oldest_unfinished_seconds"
    STALLED_WAITING = "laneway_stalled_waiting_messages"
    HOT_KEY_MESSAGES = "laneway_hot_key_messages"
    HOT_KEY_ID = "laneway_hot_key_id"
    STATE_RESTORING = "laneway_state_restoring_partitions"
    STATE_RESTORE_REMAINING = "laneway_state_restore_remaining_records"
    STATE_NOT_DURABLE = "laneway_state_not_durable_partitions"
    REBALANCES = "laneway_rebalances_total"
    WORKER_RESTARTS = "laneway_worker_restarts_total"
    ACKNOWLEDGEMENTS = "laneway_acknowledgements_total"
    ACKNOWLEDGE_ERRORS = "laneway_acknowledge_errors_total"
    REDELIVERIES = "laneway_redeliveries_total"
    CRASH_SUSPECTS = "laneway_crash_suspects_total"
    OLDEST_ACQUIRED = "laneway_oldest_acquired_seconds"
    CLOCK_SKEW = "laneway_clock_skew_total"
    RECORDS_DELETED_UNREAD = "laneway_records_deleted_unread_total"


LATENCY_BUCKETS = (
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
    0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0,
)  # fmt: skip
"""Seconds, from 100 us (a trivial handler) to 5 minutes (a stalled one), about 2.5x apart."""


@dataclass(frozen=True)
class MetricDefinition:
    """What one metric measures: its ``kind``, ``unit``, ``labels`` (in the order label
    values are passed), a one-line ``help`` and, for histograms, ``buckets``."""

    kind: MetricKind
    unit: str
    labels: tuple[str, ...]
    help: str
    buckets: tuple[float, ...] = ()


Labels = tuple[str, ...]
"""Label values, in the order of the metric definition's ``labels``."""

_TOPIC = ("topic",)
_PARTITION = ("topic", "partition")

DEFINITIONS: Mapping[Metric, MetricDefinition] = {
    Metric.MESSAGES_PROCESSED: MetricDefinition(
        MetricKind.COUNTER, "messages", _TOPIC, "Messages whose handler finished."
    ),
    Metric.MESSAGES_FAILED: MetricDefinition(
        MetricKind.COUNTER,
        "messages",
        _TOPIC,
        "Messages given up on after their last attempt (or skipped by an open key circuit), "
        "once settled.",
    ),
    Metric.RETRIES: MetricDefinition(
        MetricKind.COUNTER, "attempts", _TOPIC, "Handler attempts after a failed one."
    ),
    Metric.DEAD_LETTERS: MetricDefinition(
        MetricKind.COUNTER,
        "messages",
        _TOPIC,
        "Failed messages written to the dead-letter topic and acknowledged.",
    ),
    Metric.DESERIALIZATION_FAILURES: MetricDefinition(
        MetricKind.COUNTER,
        "messages",
        _TOPIC,
        "Records whose key or value the consumer's deserializer could not decode: "
        "dead-lettered without calling the handler (laneway.error.type=deserialization).",
    ),
    Metric.HANDLER_DURATION: MetricDefinition(
        MetricKind.HISTOGRAM,
        "seconds",
        _TOPIC,
        "Time a message spent in its handler, retries and their backoffs included.",
        LATENCY_BUCKETS,
    ),
    Metric.END_TO_END_LATENCY: MetricDefinition(
        MetricKind.HISTOGRAM,
        "seconds",
        _TOPIC,
        "From the message's timestamp to its handler finishing; a timestamp ahead of this "
        "host's clock counts as 0 (see laneway_clock_skew_total).",
        LATENCY_BUCKETS,
    ),
    Metric.IN_FLIGHT: MetricDefinition(
        MetricKind.GAUGE, "messages", (), "Handlers running now (sent to a worker, for process)."
    ),
    Metric.BUFFERED: MetricDefinition(
        MetricKind.GAUGE,
        "messages",
        (),
        "Fetched messages not finished yet (bounded by max_buffered).",
    ),
    Metric.PAUSED_PARTITIONS: MetricDefinition(
        MetricKind.GAUGE, "partitions", (), "Owned partitions paused for backpressure."
    ),
    Metric.COMMITTED_OFFSET: MetricDefinition(
        MetricKind.GAUGE,
        "offset",
        _PARTITION,
        "The last committed offset (next to read); not for share groups, which commit none.",
    ),
    Metric.CONSUMER_LAG: MetricDefinition(
        MetricKind.GAUGE,
        "messages",
        _PARTITION,
        "The log's end offset minus the committed offset.",
    ),
    Metric.BACKLOG: MetricDefinition(
        MetricKind.GAUGE,
        "messages",
        _PARTITION,
        "The consumer lag minus the offsets known finished beyond the commit point: the work "
        "really left (laneway lag's figure, as of now rather than the last commit); 0 for a "
        "partition this member no longer owns, so a sum over members counts each once.",
    ),
    Metric.DRAIN_SECONDS: MetricDefinition(
        MetricKind.GAUGE,
        "seconds",
        (),
        "This member's backlog divided by the messages it finished per second over the last "
        "30 s; with none finished, the backlog times the seconds observed (a lower bound, "
        "never infinite). NaN for a share group, whose backlog a member cannot know.",
    ),
    Metric.OLDEST_UNFINISHED: MetricDefinition(
        MetricKind.GAUGE,
        "seconds",
        _PARTITION,
        "How long the partition's oldest running message has been in its handler (0: none).",
    ),
    Metric.STALLED_WAITING: MetricDefinition(
        MetricKind.GAUGE,
        "messages",
        _PARTITION,
        "Messages of the partition that cannot start until a call past stall_timeout returns "
        "(its key's later messages; with ordering=partition the partition's) (0: none).",
    ),
    Metric.HOT_KEY_MESSAGES: MetricDefinition(
        MetricKind.GAUGE,
        "messages",
        ("rank",),
        "Fetched-but-unfinished messages of the rank-th hottest key (1-10; 0: fewer keys "
        "hold any); thread, async and process engines under ordering=key.",
    ),
    Metric.HOT_KEY_ID: MetricDefinition(
        MetricKind.GAUGE,
        "id",
        ("rank",),
        "A 48-bit hash of the rank-th hottest key (the same key, the same id): tells hot "
        "keys apart without showing them (0: no key at that rank).",
    ),
    Metric.STATE_RESTORING: MetricDefinition(
        MetricKind.GAUGE,
        "partitions",
        (),
        "Owned partitions whose state is being restored from the changelog (their messages "
        "wait; the others run), or waiting to restore again after a failed attempt.",
    ),
    Metric.STATE_RESTORE_REMAINING: MetricDefinition(
        MetricKind.GAUGE,
        "records",
        _PARTITION,
        "Changelog records the partition's state restore has still to read (0: restored, "
        "or the restore has not yet measured its span).",
    ),
    Metric.STATE_NOT_DURABLE: MetricDefinition(
        MetricKind.GAUGE,
        "partitions",
        (),
        "Owned partitions whose state changes have failed to reach the changelog for 30 s "
        "or more (kept in memory, nothing of them committed meanwhile: a changelog topic "
        "deleted, say). Alert on anything above 0.",
    ),
    Metric.REBALANCES: MetricDefinition(
        MetricKind.COUNTER,
        "events",
        (),
        "Partition ownership changes: assignments, revocations and losses.",
    ),
    Metric.WORKER_RESTARTS: MetricDefinition(
        MetricKind.COUNTER,
        "workers",
        (),
        "Process-engine workers replaced: they died, timed out, or were detached from a call "
        "that ran too long.",
    ),
    Metric.ACKNOWLEDGEMENTS: MetricDefinition(
        MetricKind.COUNTER,
        "records",
        ("topic", "type"),
        "Share group: records acknowledged, by type: accept (done), release (given back "
        "for a retry or unstarted at a stop), reject (after dead letters).",
    ),
    Metric.ACKNOWLEDGE_ERRORS: MetricDefinition(
        MetricKind.COUNTER,
        "records",
        _TOPIC,
        "Share group: acknowledgements the broker refused (the record lock had expired, so "
        "the record is delivered again).",
    ),
    Metric.REDELIVERIES: MetricDefinition(
        MetricKind.COUNTER,
        "records",
        _TOPIC,
        "Share group: records fetched with a delivery_count above 1 (released, lock "
        "expired, or a member left or died while holding them).",
    ),
    Metric.CRASH_SUSPECTS: MetricDefinition(
        MetricKind.COUNTER,
        "records",
        _TOPIC,
        "Share group: records that were in flight when a member process died, fetched "
        "again and run alone (see KafkaShareSource crash_journal).",
    ),
    Metric.RECORDS_DELETED_UNREAD: MetricDefinition(
        MetricKind.COUNTER,
        "records",
        _TOPIC,
        "Records deleted from the log (retention, DeleteRecords, a topic made anew) before "
        "this consumer read them, so never processed; each loss is also one WARNING naming "
        "the partition, the offset and the log start.",
    ),
    Metric.OLDEST_ACQUIRED: MetricDefinition(
        MetricKind.GAUGE,
        "seconds",
        (),
        "Share group: age of the oldest record this member holds unacknowledged; the "
        "broker delivers it again when it passes the record lock duration.",
    ),
    Metric.CLOCK_SKEW: MetricDefinition(
        MetricKind.COUNTER,
        "messages",
        _TOPIC,
        "Messages finished before their own timestamp by this host's clock (the producer's "
        "or broker's clock runs ahead, or a producer set a future timestamp); their "
        "end-to-end latency is observed as 0.",
    ),
}


@dataclass(frozen=True)
class Distribution:
    """A batch of histogram observations, already bucketed by the metric's ``buckets``:
    ``cumulative[i]`` observations were at most ``buckets[i]``, ``count`` in all, summing
    to ``total``. laneway buckets a whole completion batch at once, so a backend only adds
    numbers: per-message observation calls would cost more than the messages themselves
    for trivial handlers. Large batches are bucketed from a sample (see :meth:`_scaled`);
    counts and sums are exact."""

    cumulative: tuple[int, ...]
    total: float
    count: int
    clamped: int = 0
    """Observations below 0 taken as 0 (:meth:`of_ages`: timestamps ahead of ``now``)."""

    @classmethod
    def of_values(cls, values: Sequence[float], buckets: Sequence[float]) -> Distribution:
        """The distribution of ``values`` (any order); see :meth:`_scaled`."""
        sample = values[:: SAMPLE_STRIDE if len(values) >= SAMPLED_FROM else 1]
        return cls._scaled(sample, len(values), buckets, sum(values))

    @classmethod
    def of_ages(
        cls, now_ms: float, stamps_ms: Sequence[float], buckets: Sequence[float]
    ) -> Distribution:
        """The distribution of ``now - stamp`` in seconds, from millisecond timestamps.

        An age is never negative: a stamp after ``now`` (a clock ahead of this host's, or a
        timestamp set in the future) counts as age 0 and in :attr:`clamped`, so one
        skewed producer cannot drive the histogram's sum below zero."""
        clamped = 0
        if stamps_ms and max(stamps_ms) > now_ms:  # rare: one C-level pass otherwise
            clamped = sum(1 for stamp in stamps_ms if stamp > now_ms)
            stamps_ms = [stamp if stamp <= now_ms else now_ms for stamp in stamps_ms]
        total = (len(stamps_ms) * now_ms - sum(stamps_ms)) / 1000.0
        sample = stamps_ms[:: SAMPLE_STRIDE if len(stamps_ms) >= SAMPLED_FROM else 1]
        ages = [(now_ms - stamp) / 1000.0 for stamp in sample]
        batch = cls._scaled(ages, len(stamps_ms), buckets, total)
        return replace(batch, clamped=clamped) if clamped else batch

    @classmethod
    def _bucketed(
        cls, values: Sequence[float], buckets: Sequence[float], total: float
    ) -> Distribution:
        sample = values[:: SAMPLE_STRIDE if len(values) >= SAMPLED_FROM else 1]
        return cls._scaled(sample, len(values), buckets, total)

    @classmethod
    def _scaled(
        cls, sample: Sequence[float], count: int, buckets: Sequence[float], total: float
    ) -> Distribution:
        """Bucket ``sample`` and scale it to ``count`` observations summing to ``total``.

        Count and sum are always exact. Batches of ``SAMPLED_FROM`` observations or more
        are bucketed from every ``SAMPLE_STRIDE``-th one: the shape of a batch of similar
        messages is kept, and the per-message cost stays a small fraction of a trivial
        handler's (bucketing every observation cost 10-15% of its throughput).
        """
        if not count:
            return cls((0,) * len(buckets), 0.0, 0)
        ordered = sorted(sample)
        scale = count / len(ordered)
        cumulative = tuple(min(count, round(bisect_right(ordered, b) * scale)) for b in buckets)
        return cls(cumulative, total, count)


SAMPLED_FROM = 64
"""Batches at least this large are bucketed from a sample (see ``Distribution``)."""
SAMPLE_STRIDE = 8
"""One observation in this many is bucketed in a sampled batch."""


class Metrics(Protocol):
    """A metrics backend. Called from the consumer's control thread only, with label
    values in the order of the metric's definition; must not block."""

    def increment(self, metric: Metric, value: float, labels: Labels = ()) -> None:
        """Add ``value`` to a counter."""

    def gauge(self, metric: Metric, value: float, labels: Labels = ()) -> None:
        """Set a gauge."""

    def observe(self, metric: Metric, batch: Distribution, labels: Labels = ()) -> None:
        """Add a batch of observations, bucketed by the metric's own buckets, to a
        histogram."""


class NoMetrics:
    """The default backend: reports nothing."""

    def __repr__(self) -> str:
        return "NoMetrics()"

    def increment(self, metric: Metric, value: float, labels: Labels = ()) -> None:
        pass

    def gauge(self, metric: Metric, value: float, labels: Labels = ()) -> None:
        pass

    def observe(self, metric: Metric, batch: Distribution, labels: Labels = ()) -> None:
        pass


NO_METRICS = NoMetrics()
"""The shared no-op backend."""


def table() -> str:
    """Every metric as a Markdown table (name, type, unit, labels, help), for the docs."""
    rows = ["| name | type | unit | labels | help |", "| --- | --- | --- | --- | --- |"]
    for metric, spec in DEFINITIONS.items():
        labels = ", ".join(spec.labels) or "-"
        rows.append(
            f"| `{metric.value}` | {spec.kind.value} | {spec.unit} | {labels} | {spec.help} |"
        )
    return "\n".join(rows)


if __name__ == "__main__":
    print(table())
