"""JSON with msgspec: decoded straight into a type, validated on the way.

``serde.json(Order)`` decodes each record's JSON into an ``Order`` — a ``msgspec.Struct``
(fastest), a dataclass, a ``TypedDict``, an ``attrs`` class, or plain JSON (``dict``,
``list``, ...) with no type — in one pass, checking it: a missing field or a string where
a number belongs is that record's failure (``Expected `int`, got `str` - at
`$.amount```), dead-lettered without calling the handler. As a serializer it encodes
Structs, dataclasses and plain values. Needs ``pip install 'laneway[json]'`` (msgspec).
"""

from __future__ import annotations

from typing import Any, TypeVar, overload

from laneway.serde.codec import Codec, require
from laneway.serde.wire import frame, unframe

T = TypeVar("T")


class JsonCodec(Codec[T]):
    """JSON records decoded into ``type`` by msgspec, and values encoded as JSON.

    ``strict=False`` lets numbers come as strings and the like (msgspec's lax mode).
    ``wire_format=True``: records carry the Schema Registry header (magic byte and schema
    id, see :mod:`laneway.serde.wire`), which is checked and skipped; with ``schema_id``
    only records of that id decode, and encoded values get that header. Tuning: a
    ``msgspec.Struct`` decodes several times faster than a dataclass; fields the handler
    does not need are skipped cheaply when left out of the type.
    """

    name = "json"

    def __init__(
        self,
        type: Any = Any,
        *,
        strict: bool = True,
        wire_format: bool = False,
        schema_id: int | None = None,
    ) -> None:
        super().__init__(
            *(() if type is Any else (type,)),
            **_changed(strict=strict, wire_format=wire_format, schema_id=schema_id),
        )
        msgspec = require("msgspec", "json", "serde.json")
        self.type = type
        self._encoder = msgspec.json.Encoder()
        decoder = msgspec.json.Decoder(type, strict=strict)
        self._schema_id = schema_id
        self._wire = wire_format or schema_id is not None
        if self._wire:
            decode = decoder.decode
            self.decode = lambda data: decode(unframe(data, schema_id)[1])
        else:
            self.decode = decoder.decode

    def encode(self, value: T, topic: str, key: bool = False) -> bytes:
        data: bytes = self._encoder.encode(value)
        if self._schema_id is not None:
            return frame(self._schema_id, data)
        return data

    def cannot_encode(self) -> str | None:
        if self._wire and self._schema_id is None:
            return f"{self!r} has no schema_id to write in the wire-format header"
        return None


@overload
def json(
    type: type[T], *, strict: bool = True, wire_format: bool = False, schema_id: int | None = None
) -> JsonCodec[T]: ...


@overload
def json(
    type: Any = Any, *, strict: bool = True, wire_format: bool = False, schema_id: int | None = None
) -> JsonCodec[Any]: ...


def json(
    type: Any = Any, *, strict: bool = True, wire_format: bool = False, schema_id: int | None = None
) -> JsonCodec[Any]:
    """A JSON codec decoding into ``type`` (see :class:`JsonCodec`); ``serde.json()``
    decodes any JSON into plain Python values."""
    return JsonCodec(type, strict=strict, wire_format=wire_format, schema_id=schema_id)


def _changed(**given: object) -> dict[str, object]:
    """The keyword arguments that differ from their defaults (what a ``repr`` shows)."""
    defaults = {"strict": True, "wire_format": False, "schema_id": None}
    return {name: value for name, value in given.items() if defaults.get(name) != value}
