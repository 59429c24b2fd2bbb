"""Avro with fastavro: schemaless records, or the Schema Registry wire format with a
known schema.

``serde.avro(schema)`` decodes each record (Avro binary, no container header, as Kafka
producers write it) with the given schema into a ``dict``, or with ``type=`` into that
type (a ``msgspec.Struct`` or dataclass, through ``msgspec.convert``; needs
``laneway[json]`` too); as a serializer it encodes dicts, Structs and dataclasses.
Records written by a Schema Registry serializer carry a 5-byte header: pass
``wire_format=True`` (any schema id, the records' writer schema being ``schema``) or
``schema_id=N`` (only that id, and written with it), or resolve every id through a
registry with :func:`laneway.serde.registry`. Needs ``pip install 'laneway[avro]'``.
"""

from __future__ import annotations

import datetime
import decimal
import io
import json as stdlib_json
import uuid
from collections.abc import Mapping
from typing import Any, TypeVar, overload

from laneway.errors import ConfigError
from laneway.serde.codec import Codec, require
from laneway.serde.wire import frame, unframe

T = TypeVar("T")

Schema = Mapping[str, Any] | str
"""An Avro schema: its JSON text, or the parsed JSON (a dict)."""


def parse(schema: Schema, what: str) -> Any:
    """``schema`` parsed by fastavro (a ConfigError naming ``what`` when it is not one)."""
    fastavro = require("fastavro", "avro", what)
    try:
        loaded = stdlib_json.loads(schema) if isinstance(schema, str) else dict(schema)
        return fastavro.parse_schema(loaded)
    except Exception as error:
        raise ConfigError(f"{what}: the schema is not a valid Avro schema: {error}") from None


class AvroCodec(Codec[T]):
    """Avro records decoded with ``schema`` (into ``type`` if given), values encoded with it.

    See the module docs for ``wire_format`` and ``schema_id``. Tuning: decoding into a
    ``dict`` is fastavro's own speed (a few microseconds for a small record); ``type``
    adds msgspec's conversion (well under a microsecond).
    """

    name = "avro"

    def __init__(
        self,
        schema: Schema,
        *,
        type: Any = None,
        wire_format: bool = False,
        schema_id: int | None = None,
    ) -> None:
        kwargs = {"type": type, "wire_format": wire_format, "schema_id": schema_id}
        super().__init__(schema, **{k: v for k, v in kwargs.items() if v not in (None, False)})
        fastavro = require("fastavro", "avro", "serde.avro")
        self.schema = parse(schema, "serde.avro")
        self.type = type
        self._schema_id = schema_id
        self._wire = wire_format or schema_id is not None
        reader, writer = fastavro.schemaless_reader, fastavro.schemaless_writer
        self._writer = writer
        parsed = self.schema
        convert = to_type(type, "serde.avro")
        wire, expected = self._wire, schema_id

        def decode(data: bytes) -> Any:
            payload = unframe(data, expected)[1] if wire else data
            record = reader(io.BytesIO(payload), parsed, None)
            return record if convert is None else convert(record)

        self.decode = decode
        self._builtins = to_builtins()

    def encode(self, value: T, topic: str, key: bool = False) -> bytes:
        out = io.BytesIO()
        self._writer(out, self.schema, self._builtins(value))
        if self._schema_id is not None:
            return frame(self._schema_id, out.getvalue())
        return out.getvalue()

    def cannot_encode(self) -> str | None:
        if self._wire and self._schema_id is None:
            return f"{self!r} has no schema_id to write in the wire-format header"
        return None


def to_type(type: Any, what: str) -> Any:
    """A function converting a decoded record (a dict) into ``type`` with msgspec, or
    ``None`` when ``type`` is ``None`` (keep the dict)."""
    if type is None:
        return None
    msgspec = require("msgspec", "json", f"{what}(type=...)")
    convert = msgspec.convert
    return lambda record: convert(record, type)


def to_builtins() -> Any:
    """A function making an encodable record of a value: Structs and dataclasses become
    dicts (through msgspec when it is installed), dicts stay as they are."""
    try:
        import msgspec
    except ImportError:
        import dataclasses

        def plain(value: Any) -> Any:
            is_instance = dataclasses.is_dataclass(value) and not isinstance(value, type)
            return dataclasses.asdict(value) if is_instance else value

        return plain
    builtins, kept = msgspec.to_builtins, _AVRO_NATIVE
    return lambda value: value if isinstance(value, dict) else builtins(value, builtin_types=kept)


_AVRO_NATIVE = (
    bytes,
    bytearray,
    datetime.datetime,
    datetime.date,
    datetime.time,
    decimal.Decimal,
    uuid.UUID,
)
"""Values fastavro writes itself (bytes, and the logical types): kept as they are."""


@overload
def avro(
    schema: Schema, *, type: type[T], wire_format: bool = False, schema_id: int | None = None
) -> AvroCodec[T]: ...


@overload
def avro(
    schema: Schema, *, type: None = None, wire_format: bool = False, schema_id: int | None = None
) -> AvroCodec[dict[str, Any]]: ...


def avro(
    schema: Schema, *, type: Any = None, wire_format: bool = False, schema_id: int | None = None
) -> AvroCodec[Any]:
    """An Avro codec for ``schema`` (see :class:`AvroCodec`)."""
    return AvroCodec(schema, type=type, wire_format=wire_format, schema_id=schema_id)
