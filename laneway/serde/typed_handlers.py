"""Handlers of typed messages: how the consumer wraps a handler so it gets the decoded
message, and what it checks at construction.

* sync, thread and async engines: :func:`view_handler` calls the handler with each
  :class:`~laneway.serde.decoding.Record`'s ``view`` (the control plane decoded it);
* process engine: :class:`DecodingHandler` carries the handler and the deserializers to
  the workers, which decode each batch themselves (:meth:`DecodingHandler.in_worker`).

:func:`check_fit` compares the handler's annotation (``Message[Order]``,
``list[Message[Order]]``) with what the deserializers make, where both can be known,
so a mismatch is a ConfigError when the consumer is made, not a failure per message.
"""

from __future__ import annotations

import inspect
import types
import typing
from collections.abc import Callable, Iterable
from typing import Any, Union

from laneway.errors import ConfigError
from laneway.serde.codec import Codec, TextCodec
from laneway.serde.decoding import Decoding
from laneway.types import Message


def typed_handler(
    handler: Callable[..., Any],
    value: Callable[[bytes], object] | None,
    key: Callable[[bytes], object] | None,
    in_workers: bool,
    batched: bool,
) -> Callable[..., Any]:
    """What the engine runs for ``handler`` with these deserializers: the handler itself
    when there are none, else a :class:`DecodingHandler` (``in_workers``: the process
    engine) or a :func:`view_handler`."""
    if value is None and key is None:
        return handler
    if in_workers:
        return DecodingHandler(handler, value, key)
    return view_handler(handler, batched)


def view_handler(handler: Callable[..., Any], batched: bool) -> Callable[..., Any]:
    """``handler`` called with each :class:`~laneway.serde.decoding.Record`'s view (a batch
    handler: the list of views) instead of the record; its ``open()``/``close()`` are
    kept."""
    if batched:

        def call(given: Any) -> Any:
            return handler([message[8] for message in given])

    else:

        def call(given: Any) -> Any:
            return handler(given[8])  # Record.view, read as the tuple item it is

    return with_lifecycle(call, handler)


def with_lifecycle(call: Callable[..., Any], handler: object) -> Callable[..., Any]:
    """``call`` in place of ``handler``, keeping the user's ``open()`` and ``close()`` when
    its class has them (a decoding or stateful wrapper must not hide them)."""
    kind = type(handler)
    if getattr(kind, "open", None) is None and getattr(kind, "close", None) is None:
        return call
    return _Lifecycled(call, handler)


class _Lifecycled:
    """A wrapped handler that keeps the user's ``open()`` and ``close()``."""

    __slots__ = ("_call", "_handler")

    def __init__(self, call: Callable[..., Any], handler: Any) -> None:
        self._call = call
        self._handler = handler

    def __call__(self, message: Any) -> Any:
        return self._call(message)

    def open(self) -> Any:
        return self._handler.open()

    def close(self) -> Any:
        return self._handler.close()


class DecodingHandler:
    """A process-engine handler with the deserializers its workers decode with: it pickles
    as the handler (by name) and the deserializers (codecs pickle as their arguments)."""

    def __init__(
        self,
        handler: Callable[..., Any],
        value: Callable[[bytes], object] | None,
        key: Callable[[bytes], object] | None,
    ) -> None:
        self.handler = handler
        self.value = value
        self.key = key

    def in_worker(self, batched: bool) -> tuple[Callable[..., Any], Decoding, WorkerViews]:
        """What a worker runs: the handler wrapped to get the views of the batch being run
        (the worker puts them in the :class:`WorkerViews`, see
        :meth:`~laneway.serde.decoding.Decoding.rows`) and the decoding."""
        views = WorkerViews()
        handler = self.handler
        if batched:

            def call(given: Any) -> Any:
                found = views.by_position
                return handler([found[message[:3]] for message in given])

        else:

            def call(given: Any) -> Any:
                return handler(views.by_position[given[:3]])

        return with_lifecycle(call, handler), Decoding(self.value, self.key), views

    def __call__(self, message: Message) -> Any:
        raise TypeError(
            f"{self!r} runs in process-engine workers, which decode for it (see in_worker)"
        )

    def __repr__(self) -> str:
        handler = self.handler
        if isinstance(handler, (types.FunctionType, type)):
            return f"{handler.__module__}.{handler.__qualname__}"
        return repr(handler)


class WorkerViews:
    """The views of the batch a process worker is running, by ``(topic, partition,
    offset)``."""

    __slots__ = ("by_position",)

    def __init__(self) -> None:
        self.by_position: dict[tuple[object, ...], Message[Any, Any]] = {}


def check_fit(
    handler: Callable[..., Any],
    value: Callable[[bytes], object] | None,
    key: Callable[[bytes], object] | None,
    batch_size: int | None,
) -> None:
    """Raise ConfigError when the handler's annotation says it takes messages of another
    type than the deserializers make (or one message with ``batch_size``, a list
    without). Unannotated handlers, ``Message`` alone, ``Any`` and deserializers whose
    output is not known (a plain callable, a name given as text) are not checked."""
    annotation = _first_parameter(handler)
    if annotation is None:
        return
    origin = typing.get_origin(annotation)
    takes_a_list = (
        isinstance(origin, type)
        and not issubclass(origin, tuple)  # a Message is a tuple, a batch a list of them
        and issubclass(origin, Iterable)
    )
    arguments = typing.get_args(annotation)
    one = arguments[0] if takes_a_list and arguments else annotation
    if typing.get_origin(one) is not Message:
        return
    name = _name(handler)
    if takes_a_list != (batch_size is not None):
        wanted = "a list of messages" if takes_a_list else "one message"
        raise ConfigError(
            f"handler {name} takes {wanted} (its annotation {_shown(annotation)}) but "
            f"batch_size is {'not ' if takes_a_list else ''}set; "
            + ("pass batch_size=N" if takes_a_list else "drop batch_size or take a list")
        )
    args = typing.get_args(one)
    _check_part(name, annotation, "value", args[0], value)
    if len(args) > 1:
        _check_part(name, annotation, "key", args[1], key)


def _check_part(
    name: str, annotation: object, part: str, wanted: Any, made: Callable[[bytes], object] | None
) -> None:
    produced = _produces(made)
    if produced is _UNKNOWN or wanted in (Any, object) or _fits(produced, wanted):
        return
    if made is None:
        raise ConfigError(
            f"handler {name} takes {_shown(annotation)} but no {part}_deserializer is set, so "
            f"its {part}s would be bytes; {_advice(part, wanted)}"
        )
    raise ConfigError(
        f"handler {name} takes {_shown(annotation)} but {part}_deserializer={made!r} makes "
        f"{_shown(produced)}; {_advice(part, wanted)}"
    )


def _advice(part: str, wanted: Any) -> str:
    """How to set a deserializer that makes ``wanted``, in code and for ``laneway run``."""
    wanted = typing.get_origin(wanted) or wanted
    if wanted is str:
        code, text = "serde.text()", "str"
    elif not isinstance(wanted, type) or wanted.__module__ == "builtins":
        code, text = "serde.json()", "json"
    else:
        kind = "protobuf" if hasattr(wanted, "DESCRIPTOR") else "json"
        code = f"serde.{kind}({wanted.__qualname__})"
        text = f"{kind}:{wanted.__module__}:{wanted.__qualname__}"
    return f"set {part}_deserializer={code} (laneway run: --{part}-deserializer {text})"


_UNKNOWN: Any = object()
_PLAIN_JSON: Any = dict | list | str | int | float | bool | None
"""What untyped JSON decodes into."""


def _produces(made: Callable[[bytes], object] | None) -> Any:
    """The type a deserializer makes, or ``_UNKNOWN``."""
    if made is None:
        return bytes
    if isinstance(made, TextCodec):
        return str
    if not isinstance(made, Codec):
        return _UNKNOWN
    for attribute in ("message_class", "type"):
        found = getattr(made, attribute, None)
        if found is Any and made.name == "json":
            return _PLAIN_JSON
        if found is not None:
            return _UNKNOWN if found is Any else found
    if made.name == "avro":
        return dict
    return _UNKNOWN


def _fits(produced: Any, wanted: Any) -> bool:
    """Whether a ``produced`` value is a ``wanted`` one, as far as classes tell (a
    deserializer that makes one of several types fits when any of them does)."""
    if typing.get_origin(produced) in (Union, types.UnionType):
        return any(_fits(option, wanted) for option in typing.get_args(produced))
    if typing.get_origin(wanted) in (Union, types.UnionType):
        return any(_fits(produced, option) for option in typing.get_args(wanted))
    wanted = typing.get_origin(wanted) or wanted
    produced = typing.get_origin(produced) or produced
    if not isinstance(wanted, type) or not isinstance(produced, type):
        return True  # a TypedDict, a NewType, a literal: not ours to judge
    return issubclass(produced, wanted)


def _first_parameter(handler: Callable[..., Any]) -> Any:
    try:
        parameters = list(inspect.signature(handler, eval_str=True).parameters.values())
    except Exception:  # annotations that do not resolve, builtins without a signature
        return None
    if not parameters or parameters[0].annotation is inspect.Parameter.empty:
        return None
    return parameters[0].annotation


def _name(handler: object) -> str:
    if isinstance(handler, (types.FunctionType, type)):
        return f"{handler.__module__}.{handler.__qualname__}"
    return repr(handler)


def _shown(annotation: object) -> str:
    if annotation is _PLAIN_JSON:
        return "plain JSON values (dict, list, str, int, float, bool or None)"
    if isinstance(annotation, type) and not typing.get_args(annotation):
        return annotation.__qualname__
    return repr(annotation).replace("laneway.types.", "")
