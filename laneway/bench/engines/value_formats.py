"""What the benchmark's records carry: ``--value-format bytes|json|avro``.

``bytes`` (the default): ten ASCII digits, the message's sequence number; handlers get
bytes. ``json`` and ``avro``: an order record of about 200 bytes (its ``sequence``, an
account, an amount, a currency, a status and a note), which the consumer decodes before
the handler gets it — into a ``msgspec.Struct`` (:class:`~laneway.bench.engines.orders.BenchOrder`)
for JSON, into a ``dict`` for Avro — so the rows show what decoding costs. The raw loop
decodes each record with the same codec, as a plain consume loop would.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from laneway.bench.engines.workloads import encode_value
from laneway.serde.codec import Codec

VALUE_FORMATS = ("bytes", "json", "avro")
"""The choices of ``--value-format``."""

ORDER_SCHEMA: dict[str, Any] = {
    "type": "record",
    "name": "BenchOrder",
    "namespace": "laneway.bench",
    "fields": [
        {"name": "sequence", "type": "long"},
        {"name": "account", "type": "string"},
        {"name": "amount", "type": "double"},
        {"name": "currency", "type": "string"},
        {"name": "status", "type": "string"},
        {"name": "note", "type": "string"},
    ],
}
"""The Avro schema of the ``avro`` records (the fields of the JSON ones)."""

NOTE = "x" * 96
"""Padding that brings a JSON record to about 200 bytes."""


def order(sequence: int) -> dict[str, Any]:
    """The fields of record ``sequence``."""
    return {
        "sequence": sequence,
        "account": f"acct-{sequence % 10_000:08d}",
        "amount": (sequence % 100_000) / 100,
        "currency": "EUR",
        "status": "settled",
        "note": NOTE,
    }


def value_encoder(value_format: str) -> Callable[[int], bytes]:
    """The bytes of record ``sequence`` in ``value_format``."""
    if value_format == "bytes":
        return encode_value
    if value_format == "json":
        from laneway.serde.codec import require

        encode = require("msgspec", "json", "--value-format json").json.encode
        return lambda sequence: encode(order(sequence))
    if value_format == "avro":
        codec = deserializer(value_format)
        assert codec is not None
        return lambda sequence: codec.encode(order(sequence), "bench")
    raise ValueError(f"unknown value format {value_format!r}")


def deserializer(value_format: str) -> Codec[Any] | None:
    """The consumer's ``value_deserializer`` for ``value_format`` (``None``: bytes)."""
    if value_format == "json":
        from laneway import serde
        from laneway.bench.engines.orders import BenchOrder

        return serde.json(BenchOrder)
    if value_format == "avro":
        from laneway import serde

        return serde.avro(ORDER_SCHEMA)
    return None
