"""Encoding handler results before they are written: :class:`Encoding`.

A :class:`~laneway.Produce` whose value (or key) is not bytes or ``None`` is encoded by
its own ``value_serializer`` (``key_serializer``), else the consumer's; bytes and ``None``
are written as they are. A record that cannot be encoded — no serializer for an object, or
a serializer that raised — fails the message (or batch) it was returned for, with
``error_type`` :data:`~laneway.serde.codec.SERIALIZATION`, before anything of its group
is written; the message then takes the dead-letter path like any failure.
"""

from __future__ import annotations

from collections.abc import Sequence

from laneway.results import Produce
from laneway.serde.codec import SERIALIZATION, Codec, Serializer
from laneway.types import Failure, Message

Group = tuple[list[Message], Sequence[Produce]]
"""The messages of one handler call and the records it returned (a result group)."""

_bytes = bytes


class Encoding:
    """The consumer's ``value_serializer`` and ``key_serializer``, applied to results on
    the control thread, once per batch of result groups (:meth:`encode`)."""

    def __init__(self, value: Serializer | None, key: Serializer | None) -> None:
        self._value = value
        self._key = key

    def encode(self, groups: list[Group]) -> tuple[list[Group], list[Failure]]:
        """The groups with every record in bytes, and the failures of the messages whose
        results could not be encoded."""
        ready: list[Group] = []
        failures: list[Failure] = []
        for group in groups:
            for record in group[1]:
                value, key = record[1], record[2]
                if (
                    (value is not None and value.__class__ is not _bytes)
                    or (key is not None and key.__class__ is not _bytes)
                    or record.value_serializer is not None
                    or record.key_serializer is not None
                ):
                    break
            else:
                ready.append(group)  # the common case: bytes, as they are
                continue
            messages, records = group
            try:
                ready.append((messages, [self._encoded(record) for record in records]))
            except Exception as error:
                text = f"encoding its result failed: {type(error).__name__}: {error}"
                failures += [Failure(message, SERIALIZATION, text[:500], 1) for message in messages]
        return ready, failures

    def _encoded(self, record: Produce) -> Produce:
        topic = record.topic
        value = _encode(record.value, record.value_serializer or self._value, topic, False)
        key = _encode(record.key, record.key_serializer or self._key, topic, True)
        return Produce(topic, value, key, record.headers, record.partition)


def _encode(value: object, serializer: Serializer | None, topic: str, key: bool) -> bytes | None:
    if value is None or isinstance(value, bytes):
        return value
    part = "key" if key else "value"
    if serializer is None:
        kind = type(value).__name__
        article = "an" if kind[:1].lower() in "aeiou" else "a"
        raise TypeError(
            f"the {part} of a Produce to {topic!r} is {article} {kind}, not bytes, and no "
            f"{part}_serializer is set; pass {part}_serializer= to the Consumer (e.g. "
            f"serde.json(); laneway run: --{part}-serializer json) or to the Produce, or "
            "encode it to bytes"
        )
    if isinstance(serializer, Codec) or not callable(serializer):  # a codec is callable too
        data = serializer.encode(value, topic, key)
    else:
        data = serializer(value)
    if not isinstance(data, bytes):
        raise TypeError(
            f"{part}_serializer {serializer!r:.60} returned {type(data).__name__}, not bytes"
        )
    return data
