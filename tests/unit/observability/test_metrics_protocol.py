"""The metrics protocol: the consumer's counters reach a backend and agree with stats()."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest
from metrics_recorder import Recorder
from topics import SOURCES, LogTopic

import laneway
from laneway.metrics import DEFINITIONS, Distribution, Metric, MetricKind, table
from laneway.types import Message


def test_every_metric_is_defined_once_with_help_and_in_the_table() -> None:
    assert set(DEFINITIONS) == set(Metric)
    rendered = table()
    for metric, spec in DEFINITIONS.items():
        assert spec.help and spec.unit
        assert f"`{metric.value}`" in rendered
        assert "key" not in spec.labels, "a message key is never a label"
        if spec.kind is MetricKind.HISTOGRAM:
            assert spec.buckets[0] <= 0.001 and spec.buckets[-1] >= 60
            assert list(spec.buckets) == sorted(spec.buckets)


@pytest.mark.parametrize("source_kind", SOURCES)
def test_counts_and_gauges_reach_the_backend_and_match_stats(
    source_kind: str, make_topic: Callable[[str, int], LogTopic]
) -> None:
    topic = make_topic(source_kind, 3)
    topic.produce([(b"k%d" % (i % 10), b"fail" if i % 50 == 0 else b"ok") for i in range(300)])

    def handle(message: Message) -> None:
        if message.value == b"fail":
            raise ValueError("refused")
        time.sleep(0.001)

    recorder = Recorder()
    stats = laneway.Consumer(
        topic.source("metrics"),
        handle,
        engine="thread",
        max_retries=1,
        retry_backoff=0.001,
        handle_signals=False,
        metrics=recorder,
    ).run(max_messages=300)
    name = topic.name
    assert recorder.counters[(Metric.MESSAGES_PROCESSED, (name,))] == stats.processed == 294
    assert recorder.counters[(Metric.MESSAGES_FAILED, (name,))] == stats.failed == 6
    assert recorder.counters[(Metric.DEAD_LETTERS, (name,))] == stats.dead_lettered == 6
    assert recorder.counters[(Metric.REBALANCES, ())] == stats.rebalances >= 1
    assert recorder.counters[(Metric.RETRIES, (name,))] == 6
    e2e = recorder.observed[(Metric.END_TO_END_LATENCY, (name,))]
    assert sum(batch.count for batch in e2e) == 300
    assert all(0 <= batch.total / batch.count < 60 for batch in e2e)
    durations = recorder.observed[(Metric.HANDLER_DURATION, (name,))]
    assert sum(batch.count for batch in durations) == 294, "the finished messages"
    under_a_ms = sum(batch.cumulative[3] for batch in durations)  # bucket 3: 1 ms
    assert under_a_ms < 147, "a handler sleeping 1 ms takes at least 1 ms, mostly"
    assert recorder.gauges[(Metric.BUFFERED, ())] == 0
    assert recorder.gauges[(Metric.IN_FLIGHT, ())] == 0
    committed = {
        labels[1]: value
        for (metric, labels), value in recorder.gauges.items()
        if metric is Metric.COMMITTED_OFFSET
    }
    assert committed == {str(p): end for p, end in topic.end_offsets().items()}
    lags = {labels: v for (m, labels), v in recorder.gauges.items() if m is Metric.CONSUMER_LAG}
    assert len(lags) == 3 and set(lags.values()) == {0}, "no lag after the final commit"


def test_a_backend_without_the_methods_is_a_config_error() -> None:
    log = laneway.EmbeddedLog()
    log.create_topic("t")
    with pytest.raises(laneway.ConfigError, match=r"metrics=.* \(missing increment\(\)\)"):
        laneway.Consumer(log.subscribe("t", "g"), print, metrics=object())  # type: ignore[arg-type]


def test_a_distribution_of_a_small_batch_is_exact() -> None:
    buckets = (0.001, 0.01, 0.1)
    batch = Distribution.of_values([0.0005, 0.001, 0.002, 0.05, 0.2], buckets)
    assert batch.cumulative == (2, 3, 4) and batch.count == 5
    assert batch.total == pytest.approx(0.2535)
    ages = Distribution.of_ages(10_000.0, [9_999, 9_990, 9_500, 9_000], buckets)
    assert ages.cumulative == (1, 2, 2) and ages.count == 4
    assert ages.total == pytest.approx((1 + 10 + 500 + 1000) / 1000)


def test_a_large_batch_keeps_count_and_sum_and_its_shape() -> None:
    values = [0.0005] * 600 + [0.05] * 300 + [2.0] * 100
    batch = Distribution.of_values(values, (0.001, 0.1, 1.0, 10.0))
    assert batch.count == 1_000 and batch.total == pytest.approx(sum(values))
    assert abs(batch.cumulative[0] - 600) <= 16 and abs(batch.cumulative[1] - 900) <= 16
    assert batch.cumulative[3] == 1_000
    assert list(batch.cumulative) == sorted(batch.cumulative)
