"""The metrics protocol: the consumer's counters reach a backend and agree with stats()."""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Callable, Sequence

import pytest
from topics import SOURCES, LogTopic

import laneway
from laneway.metrics import DEFINITIONS, Metric, MetricKind, table
from laneway.types import Message


class Recorder:
    """A Metrics backend that keeps every call."""

    def __init__(self) -> None:
        self.counters: dict[tuple[Metric, tuple[str, ...]], float] = defaultdict(float)
        self.gauges: dict[tuple[Metric, tuple[str, ...]], float] = {}
        self.observed: dict[tuple[Metric, tuple[str, ...]], list[float]] = defaultdict(list)

    def increment(self, metric: Metric, value: float, labels: tuple[str, ...] = ()) -> None:
        assert DEFINITIONS[metric].kind is MetricKind.COUNTER
        assert len(labels) == len(DEFINITIONS[metric].labels)
        self.counters[(metric, labels)] += value

    def gauge(self, metric: Metric, value: float, labels: tuple[str, ...] = ()) -> None:
        assert DEFINITIONS[metric].kind is MetricKind.GAUGE
        assert len(labels) == len(DEFINITIONS[metric].labels)
        self.gauges[(metric, labels)] = value

    def observe(
        self, metric: Metric, values: Sequence[float], labels: tuple[str, ...] = ()
    ) -> None:
        assert DEFINITIONS[metric].kind is MetricKind.HISTOGRAM
        self.observed[(metric, labels)].extend(values)


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
    assert len(e2e) == 300 and all(0 <= age < 60 for age in e2e)
    durations = recorder.observed[(Metric.HANDLER_DURATION, (name,))]
    assert len(durations) == 300
    assert sorted(durations)[150] >= 0.001, "a handler sleeping 1 ms takes at least 1 ms"
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
