"""Types and handlers of the typed-message tests, importable by name (process workers).

Every handler appends one line per message it got to ``<LANEWAY_TEST_RECORD_DIR>/<pid>.typed``:
the value's type and id, the key's type and the key, so a test sees what handlers got from
any engine. Protobuf message classes are built at import from a descriptor (no ``protoc``):
``Order`` (the file's first message), ``Shipment`` (its second) and ``Shipment.Item``
(nested in the second), so wire-format headers with message indexes ``[0]``, ``[1]`` and
``[1, 0]`` can all be checked.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import Any

import msgspec
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

import laneway

RECORD_DIR = "LANEWAY_TEST_RECORD_DIR"


class Order(msgspec.Struct):
    id: int
    amount: float
    note: str = ""


@dataclasses.dataclass
class Payment:
    id: int
    amount: float


@dataclasses.dataclass
class Invoice:
    order: int
    total: float


ORDER_AVRO = {
    "type": "record",
    "name": "Order",
    "namespace": "lanewaytest",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "amount", "type": "double"},
        {"name": "note", "type": "string", "default": ""},
    ],
}
"""The Avro schema of :class:`Order`."""


def note(message: laneway.Message[Any, Any]) -> None:
    value, key = message.value, message.key
    ident = _ident(value)
    line = f"{type(value).__name__} {ident} {type(key).__name__} {key!r} {message.offset}\n"
    directory = Path(os.environ[RECORD_DIR])
    with open(directory / f"{os.getpid()}.typed", "a") as out:
        out.write(line)


def _ident(value: object) -> object:
    if isinstance(value, dict):
        return value.get("id", value.get("order_id"))
    return getattr(value, "id", getattr(value, "order_id", None))


def calls(directory: Path) -> list[list[str]]:
    """What the handlers got, one ``[value type, id, key type, key repr, offset]`` each."""
    return [
        line.split(" ", 4)
        for path in sorted(directory.glob("*.typed"))
        for line in path.read_text().splitlines()
    ]


def handle_order(message: laneway.Message[Order]) -> None:
    note(message)


def handle_payment(message: laneway.Message[Payment]) -> None:
    note(message)


async def handle_order_async(message: laneway.Message[Order]) -> None:
    note(message)


async def handle_payment_async(message: laneway.Message[Payment]) -> None:
    note(message)


def handle_keyed_order(message: laneway.Message[Order, str]) -> None:
    note(message)


def refuse_odd_orders(message: laneway.Message[Order]) -> None:
    """Fail (every attempt) on an order with an odd id."""
    note(message)
    if message.value.id % 2:
        raise ValueError(f"order {message.value.id} refused")


async def refuse_odd_orders_async(message: laneway.Message[Order]) -> None:
    refuse_odd_orders(message)


def handle_orders(messages: list[laneway.Message[Order]]) -> None:
    for message in messages:
        note(message)


def invoice(message: laneway.Message[Order]) -> laneway.Produce:
    """An :class:`Invoice` result for the order, to ``<topic>.out``, keyed like it."""
    note(message)
    order = message.value
    return laneway.Produce(
        f"{message.topic}.out", Invoice(order.id, order.amount * 2), key=message.key
    )


def invoice_bytes_serializer(message: laneway.Message[Order]) -> laneway.Produce:
    """A result with a serializer of its own (``str`` of the invoice's total)."""
    order = message.value
    return laneway.Produce(
        f"{message.topic}.out",
        order.amount * 2,
        key=message.key,
        value_serializer=lambda total: f"total={total}".encode(),
    )


def handle_dict(message: laneway.Message[dict[str, Any]]) -> None:
    note(message)


async def handle_any_async(message: laneway.Message[Any]) -> None:
    note(message)


def _protobuf_classes() -> tuple[Any, Any, Any]:
    file = descriptor_pb2.FileDescriptorProto(
        name="laneway_typed_app.proto", package="lanewaytest", syntax="proto3"
    )
    field = descriptor_pb2.FieldDescriptorProto
    order = file.message_type.add(name="Order")
    order.field.add(name="id", number=1, type=field.TYPE_INT64, label=field.LABEL_OPTIONAL)
    order.field.add(name="amount", number=2, type=field.TYPE_DOUBLE, label=field.LABEL_OPTIONAL)
    shipment = file.message_type.add(name="Shipment")
    shipment.field.add(name="order_id", number=1, type=field.TYPE_INT64, label=field.LABEL_OPTIONAL)
    item = shipment.nested_type.add(name="Item")
    item.field.add(name="sku", number=1, type=field.TYPE_STRING, label=field.LABEL_OPTIONAL)
    item.field.add(name="count", number=2, type=field.TYPE_INT32, label=field.LABEL_OPTIONAL)
    pool = descriptor_pool.Default()
    try:
        pool.FindFileByName(file.name)
    except KeyError:
        pool.Add(file)
    get = message_factory.GetMessageClass
    return (
        get(pool.FindMessageTypeByName("lanewaytest.Order")),
        get(pool.FindMessageTypeByName("lanewaytest.Shipment")),
        get(pool.FindMessageTypeByName("lanewaytest.Shipment.Item")),
    )


OrderProto, ShipmentProto, ItemProto = _protobuf_classes()


def handle_shipment(message: laneway.Message[Any]) -> laneway.Produce:
    """Note the shipment; return its first item as a result (another message of the file)."""
    note(message)
    item = ItemProto(sku=f"sku-{message.value.order_id}", count=message.value.order_id % 7)
    return laneway.Produce(f"{message.topic}.out", item, key=message.key)
