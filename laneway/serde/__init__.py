"""Typed messages: deserializers for what handlers get, serializers for what they return.

::

    from laneway import serde

    consumer = laneway.Consumer(
        source, handle, engine="async",
        value_deserializer=serde.json(Order),      # or "json", "str", "bytes", any callable
        key_deserializer="str",
        value_serializer=serde.json(),             # Produce(value=obj) -> JSON bytes
    )

    async def handle(message: laneway.Message[Order]) -> None:
        message.value.amount                       # an Order; mypy --strict knows it

The formats: :func:`json` (msgspec, into a ``msgspec.Struct``, a dataclass, a
``TypedDict`` or plain JSON), :func:`avro` (fastavro, schemaless or the Schema Registry
wire format), :func:`protobuf` (a generated message class), :func:`text`, and
:func:`registry` for wire-format records whose schema ids resolve through
confluent-kafka's Schema Registry client. Each needs its extra (``pip install
'laneway[json]'``, ``[avro]``, ``[protobuf]``, ``[registry]``); a missing one is a
ConfigError naming it, when the codec is made. :class:`Codec` is what they all are.

A record that fails to decode is dead-lettered with ``laneway.error.type=deserialization``
and the decoder's message, without calling the handler and without retries; counted in
``stats().deserialization_failures`` and ``laneway_deserialization_failures_total``.

Names are imported on first use, so ``from laneway import serde`` loads none of msgspec,
fastavro or protobuf, and making one codec loads only its own.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from laneway.serde.avro_codec import AvroCodec, avro
    from laneway.serde.codec import Codec, Deserializer, Serializer, TextCodec, text
    from laneway.serde.json_codec import JsonCodec, json
    from laneway.serde.protobuf_codec import ProtobufCodec, protobuf
    from laneway.serde.schema_registry import SchemaRegistry, registry
    from laneway.serde.wire import WireFormatError

_EXPORTS = {
    "AvroCodec": "laneway.serde.avro_codec",
    "Codec": "laneway.serde.codec",
    "Deserializer": "laneway.serde.codec",
    "JsonCodec": "laneway.serde.json_codec",
    "ProtobufCodec": "laneway.serde.protobuf_codec",
    "SchemaRegistry": "laneway.serde.schema_registry",
    "Serializer": "laneway.serde.codec",
    "TextCodec": "laneway.serde.codec",
    "WireFormatError": "laneway.serde.wire",
    "avro": "laneway.serde.avro_codec",
    "json": "laneway.serde.json_codec",
    "protobuf": "laneway.serde.protobuf_codec",
    "registry": "laneway.serde.schema_registry",
    "text": "laneway.serde.codec",
}

__all__ = [
    "AvroCodec",
    "Codec",
    "Deserializer",
    "JsonCodec",
    "ProtobufCodec",
    "SchemaRegistry",
    "Serializer",
    "TextCodec",
    "WireFormatError",
    "avro",
    "json",
    "protobuf",
    "registry",
    "text",
]


def __dir__() -> list[str]:
    return list(__all__)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'laneway.serde' has no attribute {name!r}")
    value = getattr(import_module(module), name)
    globals()[name] = value
    return value
