"""Handler results (``laneway.Produce``) written to a target topic, from every engine.

What must hold (at-least-once, the default): every input's results reach the target topic,
an input's offset is committed only once its results are acknowledged, results keyed like
their input keep the input's order per key, and results that cannot be written are retried
and then take the dead-letter path with the input.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Any

import batch_recording
import process_handlers
import pytest
import recording
from chaos_harness import run_bounded
from topics import EmbeddedTopic, KafkaTopic, LogTopic

import laneway

ENGINES = ("sync", "thread", "async", "process")
GROUP = "results"


@pytest.fixture(autouse=True)
def record_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv(recording.RECORD_DIR, str(tmp_path))
    return tmp_path


def run(topic: LogTopic, engine: str, handler: Any, count: int, **options: Any) -> Any:
    consumer = laneway.Consumer(
        topic.source(GROUP),
        handler,
        engine=engine,
        concurrency=2 if engine == "process" else (None if engine == "sync" else 8),
        handle_signals=False,
        **options,
    )
    return run_bounded(consumer, count, limit=60.0)


def check_output(topic: LogTopic, count: int) -> None:
    """``count`` inputs ``(k, i)`` came out once each, in input order per key."""
    out = topic.read(f"{topic.name}.out", count)
    assert len(out) == count
    by_key: dict[bytes | None, list[int]] = defaultdict(list)
    for key, value, _ in out:
        assert value is not None
        by_key[key].append(int(value))
    for key, values in by_key.items():
        assert values == sorted(values), f"results of {key!r} out of order"
    assert sorted(v for values in by_key.values() for v in values) == list(range(count))


def inputs(count: int, keys: int = 20) -> list[tuple[bytes, bytes]]:
    return [(f"k{i % keys}".encode(), str(i).encode()) for i in range(count)]


@pytest.mark.parametrize("engine", ENGINES)
def test_every_engine_writes_results_in_input_order_per_key(engine: str) -> None:
    topic = EmbeddedTopic(partitions=4)
    topic.create(f"{topic.name}.out", 4)
    topic.produce(inputs(1_000))
    handler = (
        process_handlers.echo_result_async if engine == "async" else process_handlers.echo_result
    )
    stats = run(topic, engine, handler, 1_000)
    assert (stats.processed, stats.failed) == (1_000, 0)
    check_output(topic, 1_000)
    assert topic.committed(GROUP) == {p: (end, "") for p, end in topic.end_offsets().items()}


@pytest.mark.parametrize("engine", ENGINES)
def test_batch_handlers_write_results(engine: str) -> None:
    topic = EmbeddedTopic(partitions=4)
    topic.create(f"{topic.name}.out", 4)
    topic.produce(inputs(1_000))
    name = "produce_results" + ("_async" if engine == "async" else "")
    stats = run(topic, engine, getattr(batch_recording, name), 1_000, batch_size=64)
    assert (stats.processed, stats.failed) == (1_000, 0)
    check_output(topic, 1_000)


def test_results_that_cannot_be_written_are_retried_then_dead_lettered() -> None:
    """No topic ``orders.out``: every write fails, is retried max_retries times, and the
    input goes to dead letters with a ProduceError; its offset is then committed."""
    topic = EmbeddedTopic(partitions=2)
    topic.produce(inputs(10))
    stats = run(
        topic, "thread", process_handlers.echo_result, 10, max_retries=2, retry_backoff=0.01
    )
    assert (stats.processed, stats.failed, stats.dead_lettered) == (0, 10, 10)
    letters = [dict(headers) for _, _, headers in topic.read("orders.dlq", 10)]
    assert {named["laneway.error.type"] for named in letters} == {b"ProduceError"}
    assert {named["laneway.attempts"] for named in letters} == {b"3"}
    assert b"orders.out" in letters[0]["laneway.error.message"]
    assert topic.committed(GROUP) == {p: (end, "") for p, end in topic.end_offsets().items()}


def test_a_handler_returning_produce_mixed_with_other_values_fails() -> None:
    topic = EmbeddedTopic(partitions=1)
    topic.produce(inputs(3))
    stats = run(topic, "sync", process_handlers.mixed_result, 3, max_retries=0)
    assert (stats.processed, stats.failed) == (0, 3)
    [named, *_] = [dict(headers) for _, _, headers in topic.read("orders.dlq", 3)]
    assert b"mixing laneway.Produce records with other values" in named["laneway.error.message"]


def test_produce_checks_its_arguments() -> None:
    # A value that is not bytes is now checked when it is written, by the serializers
    # (tests/integration/test_typed_messages.py: without one it fails its message).
    with pytest.raises(TypeError, match="value_serializer=42"):
        laneway.Produce("out", "text", value_serializer=42)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="headers"):
        laneway.Produce("out", b"v", headers=[("h", "v")])  # type: ignore[list-item]
    for partition in (-1, "1", True):
        with pytest.raises(TypeError, match=f"partition={partition!r}"):
            laneway.Produce("out", b"v", partition=partition)  # type: ignore[arg-type]
    for topic in ("", None, b"out"):  # checked on the common record's fast path too
        with pytest.raises(TypeError, match=f"topic={topic!r}"):
            laneway.Produce(topic, b"v", b"k")  # type: ignore[arg-type]
    plain = laneway.Produce("out", b"v", b"k")
    assert tuple(plain) == ("out", b"v", b"k", None, None)
    assert (plain.value_serializer, plain.key_serializer) == (None, None)


@pytest.mark.parametrize("engine", ["sync", "process"])
def test_a_result_may_name_its_partition(engine: str) -> None:
    """A result with a ``partition`` lands in that partition whatever its key says (the
    process engine pickles it across)."""
    topic = EmbeddedTopic(partitions=2)
    topic.create(f"{topic.name}.out", 3)
    topic.produce(inputs(60, keys=1))
    stats = run(topic, engine, process_handlers.result_in_partition_by_value, 60)
    assert (stats.processed, stats.failed) == (60, 0)
    assert topic.log.end_offsets(f"{topic.name}.out") == {0: 20, 1: 20, 2: 20}
    values = [int(v or b"") for _, v, _ in topic.read(f"{topic.name}.out", 60)]
    assert sorted(values) == list(range(60))


@pytest.mark.kafka
def test_results_on_kafka(kafka_bootstrap: str) -> None:
    topic = KafkaTopic(kafka_bootstrap, partitions=4)
    topic.create(f"{topic.name}.out", 4)
    topic.produce(inputs(2_000))
    stats = run(topic, "async", process_handlers.echo_result_async, 2_000)
    assert (stats.processed, stats.failed) == (2_000, 0)
    check_output(topic, 2_000)


class PauseRecordingSource(laneway.KafkaSource):
    """The Kafka source, remembering every pause the consumer asked of it."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.pauses: list[list[tuple[str, int]]] = []

    def pause(self, partitions: Any) -> None:
        partitions = sorted(partitions)
        self.pauses.append(partitions)
        super().pause(partitions)


@pytest.mark.kafka
@pytest.mark.timing  # a log that stalls its acknowledgements for 0.25 s pauses rightly
def test_inputs_waiting_for_their_results_do_not_pause_partitions(kafka_bootstrap: str) -> None:
    # The sync engine handles what it fetches at once, so everything it buffers only waits
    # for its results' acknowledgement: no partition holds a share of handler work, and a
    # pause would drop the client's prefetched messages for nothing. (Counted as work, the
    # inputs of a round of writes filled half of this small buffer and paused partitions
    # dozens of times a run.)
    topic = KafkaTopic(kafka_bootstrap, partitions=8)
    topic.create(f"{topic.name}.out", 8)
    topic.produce(inputs(100_000, keys=400))
    source = PauseRecordingSource(kafka_bootstrap, group=GROUP, topics=[topic.name])
    consumer = laneway.Consumer(
        source,
        process_handlers.echo_result,
        engine="sync",
        max_buffered=2_000,
        handle_signals=False,
    )
    stats = run_bounded(consumer, 100_000, limit=120.0)
    assert (stats.processed, stats.failed) == (100_000, 0)
    assert source.pauses == []
    check_output(topic, 100_000)
