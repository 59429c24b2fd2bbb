"""The ``value_deserializer`` / ``key_deserializer`` / ``value_serializer`` /
``key_serializer`` options: what each accepts, and the text forms ``laneway run`` takes.

In code: a :mod:`laneway.serde` codec, any callable, or one of the names. As text (a
flag, a ``LANEWAY_*`` variable, a TOML key) or in code:

* ``bytes``: no decoding (the default): handlers get bytes;
* ``str``: UTF-8 text (:func:`~laneway.serde.codec.text`);
* ``json``: any JSON, as plain Python values (:func:`~laneway.serde.json`);
* ``FORMAT:MODULE:ATTR``: a format with a type or schema imported from ``MODULE``:
  ``json:myapp.models:Order`` (JSON into the class ``Order``),
  ``avro:myapp.schemas:ORDER`` (Avro with the schema ``ORDER``, a dict or JSON text),
  ``protobuf:myapp.orders_pb2:Order`` (Protobuf messages of the class ``Order``); or a
  ready codec of that format (``avro:myapp.codecs:ORDERS``, where ``ORDERS =
  serde.avro(schema, type=Order)``), used as it is;
* ``MODULE:ATTR``: a codec object or a callable defined in ``MODULE``.

Modules are imported from the working directory or ``sys.path``, like the handler.
"""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Callable
from typing import Any

from laneway.errors import ConfigError
from laneway.serde.codec import Serializer

FORMATS = ("json", "avro", "protobuf")
"""The formats of ``FORMAT:MODULE:ATTR``."""
NAMES = ("bytes", "str", "json")
"""The names an option takes by themselves."""


def deserializer(value: object, name: str) -> Callable[[bytes], object] | None:
    """The checked value of a ``*_deserializer`` option (``None``: no decoding)."""
    found: Callable[[bytes], object] | None = _codec_option(
        value, name, "a callable (bytes) -> value"
    )
    return found


def serializer(value: object, name: str) -> Serializer | None:
    """The checked value of a ``*_serializer`` option (``None``: only bytes are written)."""
    found: Serializer | None = _codec_option(value, name, "a callable (value) -> bytes")
    reason = getattr(found, "cannot_encode", lambda: None)()
    if reason:
        raise ConfigError(f"{name}={value!r} is not valid: {reason}")
    return found


def _codec_option(value: object, name: str, what: str) -> Any:
    if value is None:
        return None
    if isinstance(value, str):
        return _from_text(value.strip(), name)
    if not callable(value):
        raise ConfigError(
            f"{name}={value!r} is not valid; expected {', '.join(map(repr, NAMES))}, "
            f"a laneway.serde codec, {what}, or 'FORMAT:MODULE:ATTR' text"
        )
    return value


def _from_text(text: str, name: str) -> Any:
    from laneway import serde

    if text == "bytes" or not text:
        return None
    if text == "str":
        return serde.text()
    if text == "json":
        return serde.json()
    head, _, rest = text.partition(":")
    if head in FORMATS and ":" in rest:
        target = load(rest, name)
        if isinstance(target, serde.Codec):
            if target.name != head:
                raise ConfigError(
                    f"{name}={text!r} names a {target.name} codec, {target!r:.60}, not a "
                    f"{head} one; give {rest} without '{head}:' to use it as it is"
                )
            return target
        if head == "json":
            return serde.json(target)
        if head == "avro":
            return serde.avro(target)
        return serde.protobuf(target)
    if ":" not in text:
        raise ConfigError(
            f"{name}={text!r} is not valid; expected {', '.join(map(repr, NAMES))}, "
            "FORMAT:MODULE:ATTR (FORMAT one of json, avro, protobuf; e.g. "
            "json:myapp.models:Order) or MODULE:ATTR of a codec or callable"
        )
    target = load(text, name)
    if not callable(target):
        raise ConfigError(f"{name}={text!r} names {target!r:.60}, which is not callable")
    return target


def load(reference: str, name: str) -> Any:
    """The object ``reference`` (``package.module:attribute``) names, the module imported
    from the working directory or ``sys.path``; a ConfigError naming option ``name``."""
    module_name, _, attribute = reference.partition(":")
    if not module_name or not attribute:
        raise ConfigError(f"{name}: {reference!r} is not MODULE:ATTR")
    if "" not in sys.path and os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        target: Any = importlib.import_module(module_name)
    except Exception as error:
        raise ConfigError(
            f"{name}: cannot import module {module_name!r}: {type(error).__name__}: {error}"
        ) from None
    for part in attribute.split("."):
        if not hasattr(target, part):
            raise ConfigError(f"{name}: module {module_name!r} has no attribute {attribute!r}")
        target = getattr(target, part)
    return target
