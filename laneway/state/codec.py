"""How a state value becomes bytes in the changelog and the state file, and back.

By default JSON, through msgspec when it is installed (``laneway[json]``; several times
faster) and the standard library's ``json`` otherwise: any JSON value (numbers, strings,
lists, dicts). Any :mod:`laneway.serde` codec that encodes (``serde.json(Account)``,
``serde.avro(schema)``, ``serde.protobuf(Cls)``) can be given instead. A
:class:`StateCodec` pickles as what it was made with, so process-engine workers build
their own.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from laneway.errors import ConfigError


class StateCodec:
    """Encodes and decodes state values with ``serializer`` (a :mod:`laneway.serde` codec;
    ``None``: JSON). Tuning: a ``msgspec.Struct`` through ``serde.json(Struct)`` is the
    fastest typed value; plain numbers and small dicts cost a few hundred nanoseconds."""

    __slots__ = ("decode", "encode", "serializer", "topic")

    def __init__(self, serializer: Any, topic: str) -> None:
        self.serializer = serializer
        self.topic = topic
        self.encode: Callable[[Any], bytes]
        self.decode: Callable[[bytes], Any]
        if serializer is None:
            try:
                import msgspec
            except ImportError:
                self.encode = _stdlib_encode
                self.decode = json.loads
            else:
                self.encode = msgspec.json.Encoder().encode
                self.decode = msgspec.json.Decoder().decode
            return
        encode = getattr(serializer, "encode", None)
        decode = getattr(serializer, "decode", None)
        if not callable(encode) or not callable(decode):
            raise ConfigError(
                f"StateStore serializer={serializer!r:.60} is not valid; expected a "
                "laneway.serde codec that encodes and decodes (serde.json(...), "
                "serde.avro(...), serde.protobuf(...)), or None for JSON"
            )
        reason = getattr(serializer, "cannot_encode", lambda: None)()
        if reason is not None:
            raise ConfigError(f"StateStore serializer={serializer!r:.60} is not valid: {reason}")
        self.encode = lambda value: encode(value, topic)
        self.decode = decode

    def __reduce__(self) -> tuple[type[StateCodec], tuple[Any, str]]:
        return StateCodec, (self.serializer, self.topic)


def _stdlib_encode(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":")).encode()
