"""Typed messages end to end on the embedded log: every engine hands handlers decoded
values, a record that does not decode is dead-lettered without running, results are
encoded by the serializers.

What must hold: a handler of ``Message[Order]`` gets ``Order`` values (and keys decoded by
``key_deserializer``) from every engine; a record whose value or key does not decode goes
to dead letters with ``laneway.error.type=deserialization`` and the decoder's message,
``laneway.attempts=0`` (the handler never ran, nothing was retried), its bytes as read,
and is counted in ``stats()`` and the metric; ordering still goes by the key's bytes;
``Produce(value=obj)`` is written in the serializer's format, and an object with no
serializer fails its message with an error naming the option.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec
import pytest
import typed_app
from chaos_harness import run_bounded
from metrics_recorder import Recorder
from topics import EmbeddedTopic
from typed_app import ORDER_AVRO, Order, OrderProto, Payment

import laneway
from laneway import serde
from laneway.errors import ConfigError
from laneway.metrics import Metric
from laneway.testing import ConsumerRunner

ENGINES = ("sync", "thread", "async", "process")
ASYNC = {Order: typed_app.handle_order_async, Payment: typed_app.handle_payment_async}
SYNC = {Order: typed_app.handle_order, Payment: typed_app.handle_payment}
GROUP = "typed"


@pytest.fixture(autouse=True)
def record_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv(typed_app.RECORD_DIR, str(tmp_path))
    return tmp_path


def run(topic: EmbeddedTopic, engine: str, handler: Any, count: int, **options: Any) -> Any:
    consumer = laneway.Consumer(
        topic.source(GROUP),
        handler,
        engine=engine,
        concurrency=2 if engine == "process" else None if engine == "sync" else 8,
        handle_signals=False,
        retry_backoff=0.01,
        **options,
    )
    return run_bounded(consumer, count, limit=60.0)


def letters(
    topic: EmbeddedTopic, count: int
) -> list[tuple[bytes | None, bytes | None, dict[str, bytes | None]]]:
    return [(k, v, dict(h)) for k, v, h in topic.read(f"{topic.name}.dlq", count)]


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("kind", [Order, Payment], ids=["struct", "dataclass"])
def test_every_engine_hands_handlers_decoded_values(
    engine: str, kind: type, record_dir: Path
) -> None:
    topic = EmbeddedTopic(partitions=3)
    good = [
        (f"k{i % 5}".encode(), msgspec.json.encode(kind(i, i * 1.5)))  # type: ignore[call-arg]
        for i in range(40)
    ]
    bad = [(b"bad-json", b'{"id": 1, "amount": '), (b"bad-type", b'{"id": "x", "amount": 1}')]
    topic.produce(good[:20] + bad + good[20:])
    handler = (ASYNC if engine == "async" else SYNC)[kind]
    metrics = Recorder()
    stats = run(
        topic,
        engine,
        handler,
        42,
        value_deserializer=serde.json(kind),
        metrics=metrics,
        max_retries=3,
    )
    calls = typed_app.calls(record_dir)
    assert sorted(int(c[1]) for c in calls) == list(range(40))
    assert {c[0] for c in calls} == {kind.__name__}
    assert {c[2] for c in calls} == {"bytes"}  # no key_deserializer: keys stay bytes
    assert (stats.processed, stats.failed, stats.deserialization_failures) == (40, 2, 2)
    assert metrics.counters[(Metric.DESERIALIZATION_FAILURES, (topic.name,))] == 2
    assert metrics.counters.get((Metric.RETRIES, (topic.name,)), 0) == 0
    dead = {key: (value, headers) for key, value, headers in letters(topic, 2)}
    assert set(dead) == {b"bad-json", b"bad-type"}
    for key, (value, headers) in dead.items():
        assert value == dict(bad)[key]  # the bytes as read
        assert headers["laneway.error.type"] == b"deserialization"
        assert headers["laneway.attempts"] == b"0"
    assert b"DecodeError: Input data was truncated" in dead[b"bad-json"][1]["laneway.error.message"]
    assert b"Expected `int`, got `str` - at `$.id`" in dead[b"bad-type"][1]["laneway.error.message"]


@pytest.mark.parametrize("engine", ENGINES)
def test_a_failed_handler_dead_letters_the_record_as_read(engine: str, record_dir: Path) -> None:
    """Handlers get decoded messages; what goes to dead letters after their last attempt
    is the record's own bytes, key included."""
    topic = EmbeddedTopic(partitions=2)
    values = {i: msgspec.json.encode(Order(i, 1.0, "é")) for i in range(6)}
    topic.produce([(f"key-{i}".encode(), values[i]) for i in range(6)])
    handler = (
        typed_app.refuse_odd_orders_async if engine == "async" else typed_app.refuse_odd_orders
    )
    stats = run(
        topic,
        engine,
        handler,
        6,
        value_deserializer=serde.json(Order),
        key_deserializer="str",
        max_retries=1,
    )
    assert (stats.processed, stats.failed, stats.deserialization_failures) == (3, 3, 0)
    dead = sorted(
        (key, value, headers["laneway.attempts"]) for key, value, headers in letters(topic, 3)
    )
    assert dead == [(f"key-{i}".encode(), values[i], b"2") for i in (1, 3, 5)]
    assert [c[0] for c in typed_app.calls(record_dir)].count("Order") == 9  # 3 + 3 x 2


def test_on_failure_gets_the_message_as_read() -> None:
    topic = EmbeddedTopic(partitions=1)
    topic.produce([(b"k", msgspec.json.encode(Order(1, 1.0))), (b"k", b"{")])
    got: list[tuple[laneway.Message, laneway.Failure]] = []
    stats = run(
        topic,
        "thread",
        typed_app.refuse_odd_orders,
        2,
        value_deserializer=serde.json(Order),
        max_retries=0,
        on_failure=lambda message, failure: got.append((message, failure)),
    )
    assert stats.failed == 2
    assert sorted((m.offset, type(m), len(m), f.error_type) for m, f in got) == [
        (0, laneway.Message, 8, "ValueError"),
        (1, laneway.Message, 8, "deserialization"),
    ]
    assert {m.offset: m.value for m, _ in got} == {0: msgspec.json.encode(Order(1, 1.0)), 1: b"{"}


@pytest.mark.parametrize("engine", ["thread", "process"])
def test_keys_decode_and_keep_their_order(engine: str, record_dir: Path) -> None:
    topic = EmbeddedTopic(partitions=2)
    topic.produce(
        [(f"acct-{i % 3}".encode(), msgspec.json.encode(Order(i, 1.0))) for i in range(30)]
    )
    topic.produce([("é".encode("latin-1"), msgspec.json.encode(Order(99, 1.0)))])  # not UTF-8
    stats = run(
        topic,
        engine,
        typed_app.handle_keyed_order,
        31,
        value_deserializer="json:typed_app:Order",
        key_deserializer="str",
        ordering="key",
    )
    assert (stats.processed, stats.deserialization_failures) == (30, 1)
    calls = typed_app.calls(record_dir)
    assert {(c[2], c[3]) for c in calls} == {("str", f"'acct-{n}'") for n in range(3)}
    by_key: dict[str, list[int]] = {}
    for call in calls:
        by_key.setdefault(call[3], []).append(int(call[1]))
    assert all(ids == sorted(ids) for ids in by_key.values())
    [(key, _, headers)] = letters(topic, 1)
    assert key == "é".encode("latin-1")
    assert b"could not decode the key: UnicodeDecodeError" in headers["laneway.error.message"]


@pytest.mark.parametrize("engine", ["thread", "process"])
def test_batch_handlers_get_lists_of_decoded_messages(engine: str, record_dir: Path) -> None:
    topic = EmbeddedTopic(partitions=2)
    topic.produce([(b"k", msgspec.json.encode(Order(i, 1.0))) for i in range(25)] + [(b"k", b"[]")])
    stats = run(
        topic,
        engine,
        typed_app.handle_orders,
        26,
        value_deserializer=serde.json(Order),
        batch_size=10,
    )
    assert (stats.processed, stats.deserialization_failures) == (25, 1)
    assert sorted(int(c[1]) for c in typed_app.calls(record_dir)) == list(range(25))


def test_tombstones_stay_none(record_dir: Path) -> None:
    topic = EmbeddedTopic(partitions=1)
    topic.log.produce(topic.name, value=None, key=b"gone")
    stats = run(topic, "sync", typed_app.handle_order, 1, value_deserializer=serde.json(Order))
    assert (stats.processed, stats.deserialization_failures) == (1, 0)
    assert typed_app.calls(record_dir)[0][:2] == ["NoneType", "None"]


@pytest.mark.parametrize("engine", ["sync", "process"])
def test_results_are_written_by_the_value_serializer(engine: str) -> None:
    topic = EmbeddedTopic(partitions=2)
    topic.create(f"{topic.name}.out", 2)
    topic.produce([(f"k{i}".encode(), msgspec.json.encode(Order(i, 2.0))) for i in range(10)])
    stats = run(
        topic,
        engine,
        typed_app.invoice,
        10,
        value_deserializer=serde.json(Order),
        value_serializer="json",
    )
    assert (stats.processed, stats.failed) == (10, 0)
    out = topic.read(f"{topic.name}.out", 10)
    decoded = sorted(
        (key, msgspec.json.decode(value, type=typed_app.Invoice)) for key, value, _ in out
    )
    assert decoded == sorted((f"k{i}".encode(), typed_app.Invoice(i, 4.0)) for i in range(10))


def test_a_records_own_serializer_wins() -> None:
    topic = EmbeddedTopic(partitions=1)
    topic.create(f"{topic.name}.out", 1)
    topic.produce([(b"k", msgspec.json.encode(Order(1, 2.5)))])
    stats = run(
        topic,
        "thread",
        typed_app.invoice_bytes_serializer,
        1,
        value_deserializer=serde.json(Order),
        value_serializer="json",
    )
    assert stats.processed == 1
    assert [value for _, value, _ in topic.read(f"{topic.name}.out", 1)] == [b"total=5.0"]


@pytest.mark.parametrize("engine", ["sync", "process"])
def test_a_result_object_without_a_serializer_fails_its_message(engine: str) -> None:
    topic = EmbeddedTopic(partitions=1)
    topic.create(f"{topic.name}.out", 1)
    topic.produce([(b"k", msgspec.json.encode(Order(1, 2.5)))])
    stats = run(topic, engine, typed_app.invoice, 1, value_deserializer=serde.json(Order))
    assert (stats.processed, stats.failed, stats.dead_lettered) == (0, 1, 1)
    assert topic.read(f"{topic.name}.out", 1) == []
    [(_, _, headers)] = letters(topic, 1)
    assert headers["laneway.error.type"] == b"serialization"
    text = headers["laneway.error.message"] or b""
    assert b"is an Invoice, not bytes, and no value_serializer is set" in text


def test_avro_and_protobuf_records_decode(record_dir: Path) -> None:
    topic = EmbeddedTopic(partitions=1)
    avro = serde.avro(ORDER_AVRO, schema_id=12)
    topic.produce(
        [(b"k", avro.encode({"id": i, "amount": 1.0, "note": ""}, "t")) for i in range(3)]
    )
    topic.produce([(b"k", b"\x00\x00\x00\x00\x0b\x02")])  # another schema id
    stats = run(topic, "thread", typed_app.handle_dict, 4, value_deserializer=avro)
    assert (stats.processed, stats.deserialization_failures) == (3, 1)
    assert {c[0] for c in typed_app.calls(record_dir)} == {"dict"}
    [(_, _, headers)] = letters(topic, 1)
    assert b"schema id 11 is not the expected 12" in headers["laneway.error.message"]

    protos = EmbeddedTopic(partitions=1)
    codec = serde.protobuf(OrderProto)
    protos.produce([(b"k", codec.encode(OrderProto(id=i, amount=2.0), "t")) for i in range(3)])
    stats = run(protos, "async", typed_app.handle_any_async, 3, value_deserializer=codec)
    assert stats.processed == 3
    assert [c[0] for c in typed_app.calls(record_dir)].count("Order") == 3


def test_a_handler_that_does_not_fit_its_deserializer_is_refused() -> None:
    source = EmbeddedTopic(partitions=1).source(GROUP)
    with pytest.raises(
        ConfigError, match=r"takes Message\[typed_app.Order\] but no value_deserializer"
    ):
        laneway.Consumer(source, typed_app.handle_order)
    with pytest.raises(
        ConfigError, match=r"value_deserializer=serde.json\(typed_app.Payment\) makes Payment"
    ):
        laneway.Consumer(source, typed_app.handle_order, value_deserializer=serde.json(Payment))  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="key_deserializer"):
        laneway.Consumer(source, typed_app.handle_keyed_order, value_deserializer=serde.json(Order))  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="batch_size is not set"):
        laneway.Consumer(source, typed_app.handle_orders, value_deserializer=serde.json(Order))  # type: ignore[arg-type]
    with pytest.raises(ConfigError) as untyped:  # plain JSON values: dicts, not Orders
        laneway.Consumer(source, typed_app.handle_order, value_deserializer="json")
    assert "value_deserializer=serde.json() makes plain JSON values (dict, list" in str(
        untyped.value
    )
    assert "--value-deserializer json:typed_app:Order" in str(untyped.value)
    laneway.Consumer(source, typed_app.handle_dict, value_deserializer="json")
    laneway.Consumer(source, typed_app.handle_dict, value_deserializer=serde.avro(ORDER_AVRO))


def test_the_testing_plugin_builds_typed_messages(record_dir: Path) -> None:
    runner = ConsumerRunner(laneway.EmbeddedLog())
    run_ = runner(
        typed_app.handle_keyed_order,
        [("a", Order(1, 1.0)), ("b", Order(2, 2.0)), ("c", b"{oops")],
        value_deserializer=serde.json(Order),
        key_deserializer=serde.text(),
    )
    assert sorted(c[3] for c in typed_app.calls(record_dir)) == ["'a'", "'b'"]
    [letter] = run_.assert_dead_lettered("c", error="deserialization")
    assert letter.attempts == 0
    assert letter.value == b"{oops"
    with pytest.raises(TypeError, match="pass bytes or text, or a value_deserializer"):
        runner(typed_app.handle_dict, [Order(1, 1.0)], value_deserializer=msgspec.json.decode)
