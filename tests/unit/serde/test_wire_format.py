"""The Schema Registry wire format, byte for byte against confluent-kafka's serializers.

confluent-kafka's own ``AvroSerializer``, ``ProtobufSerializer`` and ``JSONSerializer``
(with its in-memory ``MockSchemaRegistryClient``: no registry server runs here) write
records; laneway's codecs must write the same bytes and read theirs back.
"""

from __future__ import annotations

import json

import pytest
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroSerializer
from confluent_kafka.schema_registry.common.serde import SchemaId
from confluent_kafka.schema_registry.json_schema import JSONSerializer
from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer, ProtobufSerializer
from confluent_kafka.serialization import MessageField, SerializationContext
from typed_app import ORDER_AVRO, ItemProto, OrderProto, ShipmentProto

from laneway import serde
from laneway.serde.protobuf_codec import message_indexes
from laneway.serde.wire import (
    WireFormatError,
    encode_indexes,
    frame,
    read_varint,
    unframe,
    unframe_protobuf,
    zigzag_varint,
)

VALUE = SerializationContext("orders", MessageField.VALUE)


def mock_registry() -> SchemaRegistryClient:
    return SchemaRegistryClient.new_client({"url": "mock://wire-format"})


def test_avro_records_are_confluents_bytes() -> None:
    client = mock_registry()
    client.register_schema("other-value", Schema(json.dumps({"type": "string"}), "AVRO"))
    theirs = AvroSerializer(client, json.dumps(ORDER_AVRO))
    record = {"id": 7, "amount": 12.5, "note": "fragile"}
    written = theirs(record, VALUE)
    schema_id = client.get_latest_version("orders-value").schema_id
    assert schema_id == 2  # the second schema registered: the id is not always 1
    ours = serde.avro(ORDER_AVRO, schema_id=schema_id)
    assert ours.encode(record, "orders") == written
    assert ours(written) == record
    assert serde.avro(ORDER_AVRO, wire_format=True)(written) == record


@pytest.mark.parametrize(
    ("message_class", "indexes", "header"),
    [
        (OrderProto, [0], b"\x00"),
        (ShipmentProto, [1], b"\x02\x02"),
        (ItemProto, [1, 0], b"\x04\x02\x00"),
    ],
)
def test_protobuf_records_are_confluents_bytes(
    message_class: type, indexes: list[int], header: bytes
) -> None:
    client = mock_registry()
    theirs = ProtobufSerializer(message_class, client, {"use.deprecated.format": False})
    message = _sample(message_class)
    written = theirs(message, VALUE)
    schema_id = client.get_latest_version("orders-value").schema_id
    assert message_indexes(message_class.DESCRIPTOR) == indexes
    assert written[5 : 5 + len(header)] == header
    ours = serde.protobuf(message_class, schema_id=schema_id)
    assert ours.encode(message, "orders") == written
    assert ours(written) == message
    back = ProtobufDeserializer(message_class, {"use.deprecated.format": False})
    assert back(ours.encode(message, "orders"), VALUE) == message


def _sample(message_class: type) -> object:
    if message_class is OrderProto:
        return OrderProto(id=3, amount=9.75)
    if message_class is ShipmentProto:
        return ShipmentProto(order_id=3)
    return ItemProto(sku="sku-1", count=2)


def test_json_records_carry_confluents_header() -> None:
    client = mock_registry()
    schema = {"type": "object", "properties": {"id": {"type": "integer"}}}
    theirs = JSONSerializer(json.dumps(schema), client)
    written = theirs({"id": 4}, VALUE)
    schema_id = client.get_latest_version("orders-value").schema_id
    assert unframe(written)[0] == schema_id
    ours = serde.json(schema_id=schema_id)
    assert ours(written) == {"id": 4}
    assert ours.encode({"id": 4}, "orders")[:5] == written[:5]


@pytest.mark.parametrize("value", [0, 1, -1, 2, 63, -64, 64, 300, -301, 2**31, -(2**40)])
def test_zigzag_varints_are_confluents(value: int) -> None:
    ids = SchemaId("PROTOBUF")
    import io

    buffer = io.BytesIO()
    ids._write_varint(buffer, value, zigzag=True)
    assert zigzag_varint(value) == buffer.getvalue()
    assert read_varint(memoryview(buffer.getvalue()), 0) == (value, len(buffer.getvalue()))


def test_message_indexes_round_trip() -> None:
    for indexes in ([0], [1], [1, 0], [3, 2, 1], [0, 0]):
        data = frame(9, b"payload", indexes)
        assert data[5:].endswith(b"payload")
        assert unframe_protobuf(data) == (9, indexes, memoryview(b"payload"))
    assert encode_indexes([0]) == b"\x00"


@pytest.mark.parametrize(
    ("data", "expected_id", "error"),
    [
        (b"\x00\x00\x00", None, "too short"),
        (b"\x01\x00\x00\x00\x05payload", None, "magic byte 1"),
        (b"\x00\x00\x00\x00\x05payload", 6, "schema id 5 is not the expected 6"),
    ],
)
def test_unframe_refuses_what_is_not_the_wire_format(
    data: bytes, expected_id: int | None, error: str
) -> None:
    with pytest.raises(WireFormatError, match=error):
        unframe(data, expected_id)


def test_protobuf_header_that_ends_early_is_refused() -> None:
    with pytest.raises(WireFormatError, match="end before the payload"):
        unframe_protobuf(b"\x00\x00\x00\x00\x01\x04\x02")


def test_a_protobuf_record_of_another_message_fails_to_decode() -> None:
    written = serde.protobuf(ShipmentProto, schema_id=1).encode(ShipmentProto(order_id=1), "t")
    with pytest.raises(
        WireFormatError, match=r"message \[1\] of its schema, not lanewaytest.Order"
    ):
        serde.protobuf(OrderProto, wire_format=True)(written)
