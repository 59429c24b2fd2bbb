"""What a handler may return: :class:`Produce` results and, for batch handlers, :class:`Outcomes`.

A handler returns ``None`` (nothing to write), a :class:`Produce` or a list of them (records
the consumer writes to their topics; the input counts as finished only once every one is
acknowledged, or, with ``exactly_once=True``, committed in the same transaction as the
input's offset). A batch handler (``batch_size``) may instead return :class:`Outcomes`: one
outcome per message of the batch, so that a handler that knows which items failed says so
and only those are retried and dead-lettered. Any other return value (a string, a number,
a dict, a list of anything but :class:`Produce`) fails the attempt with a ``TypeError``
naming the type returned and what is allowed: the message is retried and dead-lettered like
any other failure, never counted done with its results silently dropped.

This module imports nothing outside the standard library: process-engine workers check
return values with it.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple, Protocol, TypeAlias


class Encoder(Protocol):
    """An object that encodes a value for a topic: :mod:`laneway.serde`'s codecs."""

    def encode(self, value: Any, topic: str, key: bool = False) -> bytes: ...


Serializer: TypeAlias = Callable[[Any], bytes] | Encoder
"""Anything that turns a :class:`Produce` value (or key) into bytes: an :class:`Encoder`
(a :mod:`laneway.serde` codec, through its ``encode``), or a callable."""

Records = Sequence["Produce"]
"""The results of one handler call, in the order the handler gave them."""


class _ProduceFields(NamedTuple):
    topic: str
    value: bytes | None
    key: bytes | None = None
    headers: Sequence[tuple[str, bytes | None]] | None = None  # as Message.headers
    partition: int | None = None


class Produce(_ProduceFields):
    """A record a handler asks the consumer to write: ``topic``, ``value``, ``key``,
    ``headers`` and ``partition``.

    Without a ``partition`` the key picks one with the log's partitioner, so results keyed
    like their input keep the input's order per key. The target topic must exist (missing
    topics are a failed write, retried and then dead-lettered). laneway writes its own
    records (dead letters) as ``Produce`` records too.

    ``value`` and ``key`` are bytes (or ``None``), written as they are, or any object a
    serializer turns into bytes when the record is written: the record's own
    ``value_serializer`` / ``key_serializer`` (keyword-only), else the consumer's (see
    :mod:`laneway.serde`). An object with no serializer for it fails the message it was
    returned for, with an error naming the option to set.

    Like :class:`~laneway.types.Message`, a ``Produce`` is an immutable named tuple: a
    handler may return hundreds of thousands a second, and a tuple is the cheapest object
    Python builds (a frozen dataclass took ~3x as long). Fields are checked on creation,
    so a wrong type fails in the handler call that made it, naming the field.
    """

    __slots__ = ()

    value_serializer: Serializer | None = None
    """This record's own serializer of ``value`` (``None``: the consumer's)."""
    key_serializer: Serializer | None = None
    """This record's own serializer of ``key`` (``None``: the consumer's)."""

    def __new__(
        cls,
        topic: str,
        value: object,
        key: object = None,
        headers: Sequence[tuple[str, bytes | None]] | None = None,
        partition: int | None = None,
        *,
        value_serializer: Serializer | None = None,
        key_serializer: Serializer | None = None,
    ) -> Produce:
        if not isinstance(topic, str) or not topic:
            raise TypeError(f"Produce topic={topic!r} is not valid; expected a topic name")
        if (
            headers is None
            and partition is None
            and value_serializer is None
            and key_serializer is None
        ):  # the common record: nothing more to check (a handler may make 100,000s a second)
            return tuple.__new__(cls, (topic, value, key, None, None))
        serializers = (("value_serializer", value_serializer), ("key_serializer", key_serializer))
        for name, given in serializers:
            if given is not None and not callable(given):
                raise TypeError(
                    f"Produce {name}={given!r:.60} is not valid; expected a laneway.serde "
                    "codec or a callable returning bytes"
                )
        if headers is not None and not _valid_headers(headers):
            raise TypeError(
                f"Produce headers={headers!r:.80} is not valid; expected (str, bytes | None) pairs"
            )
        if partition is not None and (
            not isinstance(partition, int) or isinstance(partition, bool) or partition < 0
        ):
            raise TypeError(
                f"Produce partition={partition!r} is not valid; expected a partition number "
                ">= 0, or None to let the key pick"
            )
        fields = (topic, value, key, headers, partition)
        if value_serializer is None and key_serializer is None:
            return tuple.__new__(cls, fields)
        record = tuple.__new__(_SerializedProduce, fields)
        record.value_serializer = value_serializer
        record.key_serializer = key_serializer
        return record


class _SerializedProduce(Produce):
    """A :class:`Produce` with serializers of its own (in its ``__dict__``: the tuple, what
    producers unpack, stays the five fields)."""

    value_serializer: Serializer | None
    key_serializer: Serializer | None


def _valid_headers(headers: object) -> bool:
    return not isinstance(headers, (str, bytes)) and all(
        isinstance(h, tuple)
        and len(h) == 2
        and isinstance(h[0], str)
        and (h[1] is None or isinstance(h[1], bytes))
        for h in headers  # type: ignore[attr-defined]
    )


Outcome = None | Produce | Sequence[Produce] | BaseException
"""One message's outcome in :class:`Outcomes`: done (``None``), done with results, or failed
(the exception, as if the handler had raised it for that message alone)."""


class Outcomes:
    """A batch handler's per-message answer: ``Outcomes([outcome, ...])``, one outcome per
    message of the batch, in the batch's order (see :data:`Outcome`).

    Failed messages are retried as a smaller batch (with the consumer's retry backoff) and
    then dead-lettered one by one; the others count as done with their results. Messages the
    handler reported done are not run again, even when an earlier message of their key
    failed: the handler chose to go on past it.
    """

    __slots__ = ("outcomes",)

    def __init__(self, outcomes: Sequence[Outcome]) -> None:
        if isinstance(outcomes, (str, bytes)) or not isinstance(outcomes, Sequence):
            raise TypeError(f"Outcomes({outcomes!r:.60}) is not valid; expected a list")
        self.outcomes = list(outcomes)

    def __repr__(self) -> str:
        return f"Outcomes({self.outcomes!r})"

    def __reduce__(self) -> tuple[type[Outcomes], tuple[list[Outcome]]]:
        return Outcomes, (self.outcomes,)


ALLOWED = "None, a laneway.Produce or a list of them"
"""What a handler may return, as error messages say it."""


def records_of(returned: object, allowed: str = ALLOWED) -> Records:
    """The results a handler's return value asks for (``[]`` when it asks for none).

    ``None`` asks for none; a :class:`Produce` or a list (or tuple) of them are results.
    Anything else raises ``TypeError`` naming the type returned and what is ``allowed``,
    so the attempt fails: an awaitable (a sync handler that forgot an ``await``: nothing
    would run it), a list holding anything but :class:`Produce` records, any other value.
    """
    if returned is None:
        return []
    if isinstance(returned, Produce):
        # A tuple, not a list: smaller and cheaper to build, for an object that waits
        # for its round in the writer (measured in paired runs: ~30% fewer collections,
        # ~20% less control-thread CPU per result; both stay tracked by the collector).
        return (returned,)
    if isinstance(returned, (list, tuple)):
        records = [r for r in returned if isinstance(r, Produce)]
        if len(records) == len(returned):
            return records
        odd = next(r for r in returned if not isinstance(r, Produce))
        kind, what = type(returned).__name__, f"{type(odd).__name__} {odd!r:.60}"
        if records:
            raise TypeError(
                f"the handler returned a {kind} mixing laneway.Produce records with other "
                f"values ({what}); return only Produce records, or none"
            )
        raise TypeError(f"the handler returned a {kind} holding {what}; return {allowed}")
    refuse_awaitable(returned)
    raise TypeError(
        f"the handler returned {type(returned).__name__} {returned!r:.80}; return {allowed}"
    )


def refuse_awaitable(result: object) -> None:
    """Raise ``TypeError`` when a sync handler returned an awaitable (say, it called an
    ``async def`` function and forgot the ``await``): nothing would ever await it, so its
    work would not run while the message counted as done. The coroutine is closed, so
    Python does not also warn that it was never awaited."""
    if result is None or not inspect.isawaitable(result):
        return
    if inspect.iscoroutine(result):
        result.close()
    raise TypeError(
        f"the handler returned {type(result).__name__} {result!r:.80}, which this engine "
        "never awaits, so its work did not run; make the handler 'async def' and use "
        "engine='async', or await the call inside an async handler"
    )
