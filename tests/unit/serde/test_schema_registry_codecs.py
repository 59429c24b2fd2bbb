"""serde.registry: wire-format records whose schema ids resolve through confluent-kafka's
Schema Registry client. No registry server can run here: these use confluent-kafka's own
in-memory client (``MockSchemaRegistryClient``, what a ``mock://`` URL gives), shared
with confluent-kafka's serializers and deserializers on the other side."""

from __future__ import annotations

import json
import pickle
from typing import Any

import pytest
from confluent_kafka.schema_registry import SchemaRegistryClient, SchemaRegistryError
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer, ProtobufSerializer
from confluent_kafka.serialization import MessageField, SerializationContext
from typed_app import ORDER_AVRO, Order, ShipmentProto

from laneway import serde
from laneway.errors import ConfigError

VALUE = SerializationContext("orders", MessageField.VALUE)
V1 = {
    "type": "record",
    "name": "Order",
    "namespace": "lanewaytest",
    "fields": [{"name": "id", "type": "long"}, {"name": "amount", "type": "double"}],
}


class CountingClient:
    """A registry client that counts schema look-ups by id."""

    def __init__(self, client: Any) -> None:
        self.client = client
        self.lookups = 0

    def get_schema(self, schema_id: int, *args: Any, **kwargs: Any) -> Any:
        self.lookups += 1
        return self.client.get_schema(schema_id, *args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.client, name)


def mock_client() -> Any:
    return SchemaRegistryClient.new_client({"url": "mock://registry-codecs"})


def test_each_record_is_read_with_its_own_writer_schema() -> None:
    client = mock_client()
    old = AvroSerializer(client, json.dumps(V1))({"id": 1, "amount": 1.5}, VALUE)
    new = AvroSerializer(client, json.dumps(ORDER_AVRO))(
        {"id": 2, "amount": 3.0, "note": "x"}, VALUE
    )
    assert old[1:5] != new[1:5]  # two schema ids
    counting = CountingClient(client)
    codec = serde.registry(client=counting).avro()
    assert codec(old) == {"id": 1, "amount": 1.5}
    assert codec(new) == {"id": 2, "amount": 3.0, "note": "x"}
    assert codec(old) == {"id": 1, "amount": 1.5}
    assert counting.lookups == 2  # once per schema id
    evolved = serde.registry(client=client).avro(ORDER_AVRO, type=Order)
    assert evolved(old) == Order(1, 1.5, "")  # resolved to the reader schema's default
    assert evolved(new) == Order(2, 3.0, "x")


def test_an_unknown_schema_id_fails_the_record() -> None:
    codec = serde.registry(client=mock_client()).avro()
    with pytest.raises(SchemaRegistryError):
        codec(b"\x00\x00\x00\x03\xe7\x02\x00")


def test_avro_results_are_registered_and_readable_by_confluent() -> None:
    client = mock_client()
    codec = serde.registry(client=client).avro(ORDER_AVRO)
    written = codec.encode(Order(4, 8.0, "y"), "orders")
    assert client.get_latest_version("orders-value").schema_id == int.from_bytes(
        written[1:5], "big"
    )
    assert AvroDeserializer(client)(written, VALUE) == {"id": 4, "amount": 8.0, "note": "y"}
    keyed = serde.registry(client=client).avro(ORDER_AVRO, subject="orders-shared")
    keyed.encode({"id": 1, "amount": 1.0, "note": ""}, "orders", key=True)
    assert "orders-shared" in client.get_subjects()
    assert "orders-key" not in client.get_subjects()


def test_protobuf_records_both_ways() -> None:
    client = mock_client()
    written = ProtobufSerializer(ShipmentProto, client, {"use.deprecated.format": False})(
        ShipmentProto(order_id=9), VALUE
    )
    codec = serde.registry(client=client).protobuf(ShipmentProto)
    assert codec(written) == ShipmentProto(order_id=9)
    ours = codec.encode(ShipmentProto(order_id=10), "orders")
    back = ProtobufDeserializer(ShipmentProto, {"use.deprecated.format": False})
    assert back(ours, VALUE) == ShipmentProto(order_id=10)


def test_json_results_register_their_schema_once_per_subject() -> None:
    client = mock_client()
    schema = json.dumps({"type": "object", "properties": {"id": {"type": "integer"}}})
    codec = serde.registry(client=client).json(Order, schema=schema)
    first = codec.encode(Order(1, 1.0), "orders")
    second = codec.encode(Order(2, 2.0), "orders")
    assert first[:5] == second[:5]
    assert client.get_latest_version("orders-value").schema.schema_str == schema
    assert codec(second) == Order(2, 2.0)
    assert "no schema to register" in (serde.registry(client=client).json().cannot_encode() or "")


def test_a_registry_made_from_a_url_pickles_and_never_shows_its_settings() -> None:
    registry = serde.registry("mock://pickled", config={"basic.auth.user.info": "user:s3cret"})
    codec = registry.avro(ORDER_AVRO)
    again = pickle.loads(pickle.dumps(codec))
    assert repr(again) == repr(codec)
    assert repr(codec).startswith("serde.registry('mock://pickled').avro({'type': 'record'")
    assert "s3cret" not in repr(registry) + repr(codec)
    with pytest.raises(TypeError, match="cannot be sent to process-engine workers"):
        pickle.dumps(serde.registry(client=mock_client()).avro())


def test_a_registry_needs_a_url_or_a_client() -> None:
    with pytest.raises(ConfigError, match="needs a url"):
        serde.registry()
    with pytest.raises(ConfigError, match="not both"):
        serde.registry("mock://x", client=mock_client())
