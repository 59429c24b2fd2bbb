"""Decoding where the consumer dispatches: the typed message a handler gets, beside the
record as read.

The control plane calls :meth:`Decoding.decode` once per batch it dispatches (sync,
thread and async engines): each message becomes a :class:`Record` — the message as read,
which everything inside laneway keeps using (lanes and key circuits go by its key bytes,
dead letters carry its bytes) — with the decoded message a handler gets as its ``view``.
The handler is wrapped to receive it (:mod:`laneway.serde.typed_handlers`). A message that
fails to decode does not become a Record: it comes back as a
:class:`~laneway.types.Failure` (``error_type``
:data:`~laneway.serde.codec.DESERIALIZATION`, no attempt made), for the dead-letter path,
never retried.

What decoding costs in all, per format, is measured in the typed-messages guide.

The process engine decodes in its workers instead (the parent only ships bytes): the
consumer hands the engine a
:class:`~laneway.serde.typed_handlers.DecodingHandler`, which a worker unwraps to decode
each batch's rows itself with :meth:`Decoding.rows`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from laneway.metrics import NO_METRICS, Metric, Metrics
from laneway.serde.codec import DESERIALIZATION, Codec, describe_failure
from laneway.types import Failure, Message

_new = tuple.__new__


class Record(Message):
    """A message as read, with the decoded message its handler gets as :attr:`view`.

    The view rides in a ninth item of the tuple, after the eight fields as read, which
    everything inside laneway reads by name: one object per message and no ``__dict__``
    (measured: ~0.4 us a message less than a view kept in an attribute, most of it the
    garbage collector's). It compares and hashes as the message as read (a share group's
    progress finds its records by equality), pickles as it, and never reaches user code:
    handlers get the view, ``on_failure`` the message as read (:func:`as_read`).
    """

    __slots__ = ()

    def __eq__(self, other: object) -> bool:
        return self[:8] == (other[:8] if isinstance(other, Record) else other)

    def __ne__(self, other: object) -> bool:
        return not self == other

    def __hash__(self) -> int:
        return hash(self[:8])

    @property
    def view(self) -> Message[Any, Any]:
        """The decoded message its handler gets."""
        found: Message[Any, Any] = self[8]  # type: ignore[misc]
        return found

    def __reduce__(self) -> tuple[Any, ...]:
        return Message, tuple(self)[:8]


def as_read(message: Message) -> Message:
    """``message`` as read: a :class:`Record` without its view, any other as it is."""
    if isinstance(message, Record):
        plain: Message = _new(Message, message[:8])
        return plain
    return message


class Decoding:
    """The consumer's ``value_deserializer`` and ``key_deserializer``, applied to
    messages; it counts the failures (:attr:`failures`, and the metric
    ``laneway_deserialization_failures_total`` by topic).

    A ``None`` value or key (a tombstone, a record without a key) is not decoded: it stays
    ``None``. Used from one thread (the control thread, or a worker's).
    """

    def __init__(
        self,
        value: Callable[[bytes], object] | None,
        key: Callable[[bytes], object] | None,
        metrics: Metrics = NO_METRICS,
    ) -> None:
        self._value = None if value is None else _fastest(value)
        self._key = None if key is None else _fastest(key)
        self._metrics = metrics
        self.failures = 0
        """Messages that failed to decode so far (counted by :meth:`counted`)."""

    @property
    def active(self) -> bool:
        """Whether anything is decoded at all."""
        return self._value is not None or self._key is not None

    def decode(self, messages: list[Message]) -> tuple[list[Message], list[Failure]]:
        """``messages`` as :class:`Record` objects with their views, and the failures of
        those that did not decode (counted)."""
        records: list[Message] = []
        failures: list[Failure] = []
        decode_value, decode_key = self._value, self._key
        append = records.append
        for message in messages:  # the hot path: one view and one Record per message
            topic, partition, offset, key, value, headers, timestamp, count = message
            decoded_value: object = value
            decoded_key: object = key
            if decode_value is not None and value is not None:
                try:
                    decoded_value = decode_value(value)
                except Exception as error:
                    text = describe_failure(error, "value")
                    failures.append(Failure(message, DESERIALIZATION, text, 0))
                    continue
            if decode_key is not None and key is not None:
                try:
                    decoded_key = decode_key(key)
                except Exception as error:
                    text = describe_failure(error, "key")
                    failures.append(Failure(message, DESERIALIZATION, text, 0))
                    continue
            view = _new(
                Message,
                (topic, partition, offset, decoded_key, decoded_value, headers, timestamp, count),
            )
            append(
                _new(
                    Record, (topic, partition, offset, key, value, headers, timestamp, count, view)
                )
            )
        if failures:
            self.counted(failures)
        return records, failures

    def view_of(self, message: Message) -> Message[Any, Any]:
        """The decoded message (raises ``_Undecodable`` with the decoder's message)."""
        topic, partition, offset, key, value, headers, timestamp, count = message
        decode_value, decode_key = self._value, self._key
        decoded_value: object = value
        decoded_key: object = key
        if decode_value is not None and value is not None:
            try:
                decoded_value = decode_value(value)
            except Exception as error:
                raise _Undecodable(describe_failure(error, "value")) from None
        if decode_key is not None and key is not None:
            try:
                decoded_key = decode_key(key)
            except Exception as error:
                raise _Undecodable(describe_failure(error, "key")) from None
        view: Message[Any, Any] = _new(
            Message,
            (topic, partition, offset, decoded_key, decoded_value, headers, timestamp, count),
        )
        return view

    def counted(self, failures: Sequence[Failure]) -> None:
        """Count ``failures`` (deserialization failures, from here or a worker)."""
        self.failures += len(failures)
        if self._metrics is not NO_METRICS:
            for failure in failures:
                labels = (failure.message.topic,)
                self._metrics.increment(Metric.DESERIALIZATION_FAILURES, 1, labels)

    def rows(
        self, rows: Sequence[tuple[object, ...] | None]
    ) -> tuple[
        list[tuple[object, ...] | None],
        dict[tuple[object, ...], Message[Any, Any]],
        list[tuple[int, str]],
    ]:
        """A process worker's batch: the rows to run (those that failed to decode become
        ``None``, given up), the views by ``(topic, partition, offset)`` and the
        ``(index, error text)`` of each failure."""
        kept: list[tuple[object, ...] | None] = list(rows)
        views: dict[tuple[object, ...], Message[Any, Any]] = {}
        failed: list[tuple[int, str]] = []
        for index, row in enumerate(rows):
            if row is None:
                continue
            try:
                views[row[:3]] = self.view_of(Message(*row))  # type: ignore[arg-type]
            except _Undecodable as error:
                kept[index] = None
                failed.append((index, error.text))
        return kept, views, failed


class _Undecodable(Exception):
    def __init__(self, text: str) -> None:
        self.text = text


def _fastest(decode: Callable[[bytes], object]) -> Callable[[bytes], object]:
    """The callable to call per record: a codec's own ``decode`` (a C method for msgspec),
    skipping the codec's ``__call__``."""
    return decode.decode if isinstance(decode, Codec) else decode
