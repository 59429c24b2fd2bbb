"""The Schema Registry wire format: the bytes before a record's payload.

Confluent's serializers, and every client that follows them, write::

    magic byte 0 | schema id, 4 bytes big-endian | [Protobuf: message indexes] | payload

Protobuf adds which message of the schema's ``.proto`` file the payload is: the path of
indexes to it (``[1, 0]``: the first nested message of the file's second message),
written as a count and the indexes, each a zigzag varint; the common case, the file's
first message (``[0]``), is the single byte ``0``. This module reads and writes that
header; a test compares its bytes with confluent-kafka's own serializers'.
"""

from __future__ import annotations

import struct

MAGIC_BYTE = 0
"""The first byte of every wire-format record (version 0: a 4-byte schema id follows)."""
HEADER = struct.Struct(">bI")
"""Magic byte and schema id."""
MAX_INDEXES = 100_000
"""More message indexes than this in a header is not a real schema (confluent's bound)."""


class WireFormatError(ValueError):
    """Bytes that are not a wire-format record: too short, another magic byte, an
    unexpected schema id, malformed message indexes."""


def frame(schema_id: int, payload: bytes, indexes: list[int] | None = None) -> bytes:
    """``payload`` with the wire-format header for ``schema_id`` (and, for Protobuf, the
    message ``indexes``)."""
    head = HEADER.pack(MAGIC_BYTE, schema_id)
    if indexes is None:
        return head + payload
    return head + encode_indexes(indexes) + payload


def unframe(data: bytes, expected_id: int | None = None) -> tuple[int, memoryview]:
    """The schema id and the payload of a wire-format record; ``expected_id``: fail
    unless the record carries that id."""
    if len(data) < HEADER.size:
        raise WireFormatError(
            f"{len(data)} bytes is too short for the Schema Registry wire format (5-byte header)"
        )
    magic, schema_id = HEADER.unpack_from(data)
    if magic != MAGIC_BYTE:
        raise WireFormatError(
            f"magic byte {magic} is not the Schema Registry wire format's {MAGIC_BYTE}"
        )
    if expected_id is not None and schema_id != expected_id:
        raise WireFormatError(f"schema id {schema_id} is not the expected {expected_id}")
    return schema_id, memoryview(data)[HEADER.size :]


def unframe_protobuf(
    data: bytes, expected_id: int | None = None
) -> tuple[int, list[int], memoryview]:
    """The schema id, message indexes and payload of a Protobuf wire-format record."""
    schema_id, rest = unframe(data, expected_id)
    count, position = read_varint(rest, 0)
    if count < 0 or count > MAX_INDEXES:
        raise WireFormatError(f"{count} message indexes is not a valid Protobuf header")
    if count == 0:
        return schema_id, [0], rest[position:]
    indexes = []
    for _ in range(count):
        index, position = read_varint(rest, position)
        indexes.append(index)
    return schema_id, indexes, rest[position:]


def encode_indexes(indexes: list[int]) -> bytes:
    """Protobuf message ``indexes`` as the wire format writes them."""
    if indexes == [0]:
        return b"\x00"
    return b"".join(zigzag_varint(value) for value in (len(indexes), *indexes))


def zigzag_varint(value: int) -> bytes:
    """``value`` zigzag-encoded (signed to unsigned, as 64-bit) as a varint."""
    number = ((value << 1) ^ (value >> 63)) & 0xFFFF_FFFF_FFFF_FFFF
    out = bytearray()
    while number > 0x7F:
        out.append((number & 0x7F) | 0x80)
        number >>= 7
    out.append(number)
    return bytes(out)


def read_varint(data: memoryview, position: int) -> tuple[int, int]:
    """The zigzag varint at ``position`` of ``data`` and the position after it."""
    number = shift = 0
    while True:
        if position >= len(data):
            raise WireFormatError("the Protobuf message indexes end before the payload")
        byte = data[position]
        position += 1
        number |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return (number >> 1) ^ -(number & 1), position
        if shift > 63:
            raise WireFormatError("a Protobuf message index is longer than 64 bits")
