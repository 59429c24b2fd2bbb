"""What a deserializer and a serializer are to laneway, and the base class of its own.

A *deserializer* turns a record's bytes into the value a handler gets: any callable
``(data: bytes) -> T`` (``Deserializer[T]``). A *serializer* turns what a handler puts
in a :class:`~laneway.Produce` into bytes: any callable ``(value) -> bytes``. Both are
called on the consumer's control thread (process engine: deserializers in the worker),
once per record, so they should be quick; an exception they raise is that record's
failure (a deserializer's: dead-lettered with ``laneway.error.type=deserialization``,
without calling the handler; a serializer's: the message whose result it was fails).

:class:`Codec` is what :func:`laneway.serde.json`, :func:`~laneway.serde.avro`,
:func:`~laneway.serde.protobuf` and the registry's codecs are: a deserializer (it is
called with the bytes) and a serializer (:meth:`Codec.encode`, which is also told the
topic and whether it encodes a key, for Schema Registry subjects) in one object. A codec
pickles as the arguments it was made with, so process-engine workers rebuild it.
"""

from __future__ import annotations

import codecs
import importlib
from collections.abc import Callable
from typing import Any, Generic, TypeVar

from laneway import results
from laneway.errors import ConfigError

T = TypeVar("T")
T_co = TypeVar("T_co", covariant=True)

Deserializer = Callable[[bytes], T]
"""Anything that turns a record's bytes into a value: a :class:`Codec`, or a callable."""

DESERIALIZATION = "deserialization"
"""The ``error_type`` of a record that could not be decoded (the dead letter's
``laneway.error.type`` header)."""
SERIALIZATION = "serialization"
"""The ``error_type`` of a message whose result could not be encoded."""

ERROR_TEXT_LIMIT = 500
"""Characters of a decoder's error message kept in the failure (and the dead letter)."""


class Codec(Generic[T]):
    """A format: decodes bytes into a ``T`` when called, encodes one with :meth:`encode`.

    Subclasses set :attr:`decode` (the fastest callable they have, e.g. msgspec's bound
    ``Decoder.decode``: the consumer calls it once per record) and implement
    :meth:`encode`. ``args``/``kwargs`` are what the codec was made with: it pickles as
    them (a process-engine worker builds its own) and shows them in its ``repr`` (what
    ``laneway run --print-config`` prints).
    """

    name = "codec"
    """How the codec reads in its ``repr``: ``serde.<name>(...)``."""

    decode: Callable[[bytes], T]
    """Turn a record's bytes into a ``T``; raises on bytes that are not one."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        self._args = args
        self._kwargs = kwargs

    def __call__(self, data: bytes) -> T:
        return self.decode(data)

    def encode(self, value: T, topic: str, key: bool = False) -> bytes:
        """``value`` as bytes, to be written to ``topic`` as a record's key (``key``) or
        value; raises when it cannot be encoded."""
        raise NotImplementedError(f"{self!r} decodes only")

    def cannot_encode(self) -> str | None:
        """Why this codec cannot be a serializer as configured (``None``: it can)."""
        return None

    def __reduce__(self) -> tuple[Any, ...]:
        return _rebuild, (type(self), self._args, self._kwargs)

    def __repr__(self) -> str:
        shown = [_shown(arg) for arg in self._args]
        shown += [f"{name}={_shown(value)}" for name, value in self._kwargs.items()]
        return f"serde.{self.name}({', '.join(shown)})"


Serializer = results.Serializer
"""Anything that turns a :class:`~laneway.Produce` value (or key) into bytes: a
:class:`Codec` (through :meth:`Codec.encode`), or a callable."""


def _rebuild(cls: type[Codec[Any]], args: tuple[object, ...], kwargs: dict[str, object]) -> Any:
    return cls(*args, **kwargs)


def _shown(value: object) -> str:
    if isinstance(value, type):
        descriptor = getattr(value, "DESCRIPTOR", None)  # a protobuf message class
        if value.__module__ is None and descriptor is not None:
            return str(descriptor.full_name)
        return f"{value.__module__}.{value.__qualname__}"
    text = repr(value)
    return text if len(text) <= 60 else f"{text[:57]}..."


def require(module: str, extra: str, what: str) -> Any:
    """Import ``module`` for ``what`` (e.g. ``serde.json``), or raise a ConfigError naming
    the extra that installs it."""
    try:
        return importlib.import_module(module)
    except ImportError as error:
        package = module.split(".")[0]
        raise ConfigError(
            f"{what} needs the {package} package ({error}): pip install 'laneway[{extra}]'"
        ) from None


def describe_failure(error: BaseException, part: str) -> str:
    """The error text of a record whose ``part`` (``key`` or ``value``) failed to decode:
    the decoder's own message, cut to :data:`ERROR_TEXT_LIMIT` characters."""
    text = f"could not decode the {part}: {type(error).__name__}: {error}"
    if len(text) > ERROR_TEXT_LIMIT:
        return text[: ERROR_TEXT_LIMIT - 3] + "..."
    return text


class TextCodec(Codec[str]):
    """Records decoded as text (``encoding``, UTF-8 by default; bytes that are not valid
    text fail the record), strings encoded with it. What the name ``"str"`` stands for."""

    name = "text"

    def __init__(self, encoding: str = "utf-8") -> None:
        super().__init__(*(() if encoding == "utf-8" else (encoding,)))
        try:
            codecs.lookup(encoding)
        except LookupError:
            raise ConfigError(
                f"serde.text({encoding!r}) is not valid; expected a Python codec name"
            ) from None
        self.encoding = encoding
        if codecs.lookup(encoding).name == "utf-8":
            self.decode = bytes.decode
        else:
            self.decode = lambda data: data.decode(encoding)

    def encode(self, value: str, topic: str, key: bool = False) -> bytes:
        if not isinstance(value, str):
            raise TypeError(f"{self!r} encodes str, not {type(value).__name__}")
        return value.encode(self.encoding)


def text(encoding: str = "utf-8") -> TextCodec:
    """A text codec (see :class:`TextCodec`)."""
    return TextCodec(encoding)
