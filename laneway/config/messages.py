"""The options that say what a handler's messages and results are made of: the
deserializers of keys and values, and the serializers of the records handlers return.

The formats themselves are :mod:`laneway.serde`'s.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal, TypedDict

from laneway.options import OptionSpec, option
from laneway.serde.codec import Serializer
from laneway.serde.names import deserializer, serializer

CodecName = Literal["bytes", "str", "json"]
"""The names a deserializer or serializer option takes by themselves, for type checkers."""

_FORMS = (
    "bytes, str, json, FORMAT:MODULE:ATTR (FORMAT json, avro or protobuf, e.g. "
    "json:myapp.models:Order), MODULE:ATTR of a codec or callable; in code also a "
    "laneway.serde codec or any callable"
)


@dataclass(frozen=True)
class MessageOptions:
    """Deserializers and serializers (part of :class:`ConsumerConfig`)."""

    value_deserializer: Callable[[bytes], Any] | None = option(
        None,
        OptionSpec(
            f"what a record's value becomes before the handler gets it: {_FORMS}; a value "
            "that does not decode is dead-lettered without calling the handler",
            deserializer,
            "text",
            "JSON into a msgspec.Struct costs about a microsecond a record on the control "
            "thread (the process engine decodes in its workers); see the typed-messages guide",
            shown_default="bytes",
        ),
    )
    key_deserializer: Callable[[bytes], Any] | None = option(
        None,
        OptionSpec(
            f"what a record's key becomes before the handler gets it: {_FORMS}; ordering "
            "and key circuits still go by the key's bytes",
            deserializer,
            "text",
            shown_default="bytes",
        ),
    )
    value_serializer: Serializer | None = option(
        None,
        OptionSpec(
            "what turns a Produce value that is not bytes into bytes when it is written "
            f"(a Produce's own value_serializer wins): {_FORMS}",
            serializer,
            "text",
            "without one, a Produce of an object fails the message it was returned for",
            shown_default="bytes",
        ),
    )
    key_serializer: Serializer | None = option(
        None,
        OptionSpec(
            f"what turns a Produce key that is not bytes into bytes when it is written: {_FORMS}",
            serializer,
            "text",
            shown_default="bytes",
        ),
    )


class DecodingKeywords(TypedDict, total=False):
    """The deserializer keywords, typed loosely; ``Consumer``'s overloads relate them to the
    handler's message type (see :mod:`laneway.consumer`)."""

    value_deserializer: Callable[[bytes], Any] | CodecName | str | None
    key_deserializer: Callable[[bytes], Any] | CodecName | str | None


class SerializingKeywords(TypedDict, total=False):
    """The serializer keywords, typed."""

    value_serializer: Serializer | CodecName | str | None
    key_serializer: Serializer | CodecName | str | None
