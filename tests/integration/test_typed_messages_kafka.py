"""Typed messages through the real Kafka broker: JSON into a Struct, and Avro and Protobuf
records in the Schema Registry wire format, decoded, handled and written back.

The registry is confluent-kafka's in-memory client (``MockSchemaRegistryClient``: no
registry server can run here), shared by confluent-kafka's serializers, which write the
input records and read the results, and laneway's codecs in between; the records
themselves go through the broker.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import kafka_helpers
import msgspec
import pytest
import typed_app
from chaos_harness import run_bounded
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer, ProtobufSerializer
from confluent_kafka.serialization import MessageField, SerializationContext
from topics import KafkaTopic
from typed_app import ORDER_AVRO, ItemProto, Order, ShipmentProto

import laneway
from laneway import serde

pytestmark = pytest.mark.kafka

PROTOBUF = {"use.deprecated.format": False}


@pytest.fixture(autouse=True)
def record_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv(typed_app.RECORD_DIR, str(tmp_path))
    return tmp_path


def run(topic: KafkaTopic, handler: Any, count: int, **options: Any) -> laneway.ConsumerStats:
    consumer = laneway.Consumer(
        topic.source("typed"), handler, engine="thread", handle_signals=False, **options
    )
    return run_bounded(consumer, count, limit=60.0)


def test_json_into_a_struct_on_kafka(kafka_bootstrap: str, record_dir: Path) -> None:
    topic = KafkaTopic(kafka_bootstrap, partitions=3)
    records = [(f"k{i % 4}".encode(), msgspec.json.encode(Order(i, 0.5))) for i in range(30)]
    topic.produce([*records, (b"k0", b'{"amount": 1}')])
    stats = run(topic, typed_app.handle_order, 31, value_deserializer=serde.json(Order))
    assert (stats.processed, stats.deserialization_failures) == (30, 1)
    assert sorted(int(c[1]) for c in typed_app.calls(record_dir)) == list(range(30))
    [(_, value, headers)] = topic.read(f"{topic.name}.dlq", 1)
    assert value == b'{"amount": 1}'
    named = dict(headers)
    assert named["laneway.error.type"] == b"deserialization"
    assert b"missing required field `id`" in (named["laneway.error.message"] or b"")


def test_avro_round_trip_through_the_broker(kafka_bootstrap: str, record_dir: Path) -> None:
    client = SchemaRegistryClient.new_client({"url": "mock://typed-kafka-avro"})
    topic = KafkaTopic(kafka_bootstrap, partitions=2)
    topic.create(f"{topic.name}.out", 2)
    write = AvroSerializer(client, json.dumps(ORDER_AVRO))
    context = SerializationContext(topic.name, MessageField.VALUE)
    topic.produce(
        [
            (f"k{i}".encode(), write({"id": i, "amount": 1.25, "note": ""}, context))
            for i in range(12)
        ]
    )
    registry = serde.registry(client=client)
    invoice = {
        "type": "record",
        "name": "Invoice",
        "namespace": "lanewaytest",
        "fields": [{"name": "order", "type": "long"}, {"name": "total", "type": "double"}],
    }
    stats = run(
        topic,
        typed_app.invoice,
        12,
        value_deserializer=registry.avro(ORDER_AVRO, type=Order),
        value_serializer=registry.avro(invoice),
    )
    assert (stats.processed, stats.failed) == (12, 0)
    read = AvroDeserializer(client)
    out_context = SerializationContext(f"{topic.name}.out", MessageField.VALUE)
    results = sorted(
        (key, read(value, out_context)) for key, value, _ in topic.read(f"{topic.name}.out", 12)
    )
    assert results == sorted((f"k{i}".encode(), {"order": i, "total": 2.5}) for i in range(12))
    assert client.get_latest_version(f"{topic.name}.out-value").schema.schema_type == "AVRO"


def test_protobuf_round_trip_through_the_broker(kafka_bootstrap: str, record_dir: Path) -> None:
    client = SchemaRegistryClient.new_client({"url": "mock://typed-kafka-protobuf"})
    topic = KafkaTopic(kafka_bootstrap, partitions=2)
    topic.create(f"{topic.name}.out", 2)
    write = ProtobufSerializer(ShipmentProto, client, PROTOBUF)
    context = SerializationContext(topic.name, MessageField.VALUE)
    topic.produce([(b"s%d" % i, write(ShipmentProto(order_id=i), context)) for i in range(10)])
    topic.produce([(b"bad", b"\x00\x00\x00\x00\x01\x00\x08\x01")])  # message [0]: an Order
    registry = serde.registry(client=client)
    stats = run(
        topic,
        typed_app.handle_shipment,
        11,
        value_deserializer=registry.protobuf(ShipmentProto),
        value_serializer=registry.protobuf(ItemProto),
    )
    assert (stats.processed, stats.deserialization_failures) == (10, 1)
    assert {c[0] for c in typed_app.calls(record_dir)} == {"Shipment"}
    read = ProtobufDeserializer(ItemProto, PROTOBUF)
    out_context = SerializationContext(f"{topic.name}.out", MessageField.VALUE)
    items = sorted(
        (read(value, out_context).sku, read(value, out_context).count)
        for _, value, _ in topic.read(f"{topic.name}.out", 10)
    )
    assert items == sorted((f"sku-{i}", i % 7) for i in range(10))
    [(key, _, headers)] = topic.read(f"{topic.name}.dlq", 1)
    assert key == b"bad"
    assert b"message [0] of its schema, not lanewaytest.Shipment" in (
        dict(headers)["laneway.error.message"] or b""
    )
    assert kafka_helpers.committed_to_end(kafka_bootstrap, "typed", topic.name, 11)
