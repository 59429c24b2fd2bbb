"""The typed ways to make a :class:`~laneway.Consumer`: the overloads of its constructor.

A type checker matches the handler to the engine and to the deserializers before
:class:`~laneway.errors.ConfigError` does at run time:

* ``engine="async"`` takes an :data:`~laneway.types.AsyncHandler`, the other engines (and
  the default) a :data:`~laneway.types.SyncHandler`;
* without deserializers the handler takes ``Message`` (of bytes); with
  ``value_deserializer=serde.json(Order)`` it takes ``Message[Order]``, with
  ``key_deserializer=serde.text()`` also ``Message[Order, str]`` (a deserializer given by
  name or as ``FORMAT:MODULE:ATTR`` text types nothing: any handler fits);
* an :class:`~laneway.options.EngineKind` chosen at run time takes either kind of handler
  of any message type; only the constructor's checks can match those;
* with ``state=`` (a :class:`~laneway.state.store.StateStore`) the handler takes a second
  argument, its key's :class:`~laneway.state.state.State` (a batch handler the batch's
  :class:`~laneway.state.handler.States`), on any engine; the other options are checked
  when the consumer is built.

The overloads live here, in a base class, so that ``laneway/consumer.py`` stays about the
consumer; a new handler form is one more overload here, with the keywords that select it
taken out of the ``**options`` it unpacks.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Literal, TypeVar, overload

from laneway.config.messages import CodecName
from laneway.options import EngineKind
from laneway.sources.base import Source

if TYPE_CHECKING:
    from typing_extensions import Unpack

    from laneway.config import OptionsBesidesDecoding, OptionsBesidesEngine
    from laneway.config.flow import StoreOption
    from laneway.state.handler import States
    from laneway.state.state import State
    from laneway.types import AsyncHandler, SyncHandler, TypedAsyncHandler, TypedSyncHandler

T = TypeVar("T")
U = TypeVar("U")

Async = Literal["async", EngineKind.ASYNC]
"""The ``engine`` values that take an ``async def`` handler."""
Sync = Literal["sync", "thread", "process", EngineKind.SYNC, EngineKind.THREAD, EngineKind.PROCESS]
"""The ``engine`` values that take a plain handler."""
Untyped = Literal["bytes"] | None
"""A deserializer that leaves bytes as they are."""
Typed = Callable[[bytes], T] | CodecName | str
"""A deserializer making ``T`` (text names and specs: any type)."""


class ConsumerSignatures:
    """The overloaded constructor of :class:`~laneway.Consumer` (see the module docs); it
    hands every call to ``_construct``."""

    @overload
    def __init__(
        self,
        source: Source,
        handler: AsyncHandler,
        *,
        engine: Async,
        value_deserializer: Untyped = ...,
        key_deserializer: Untyped = ...,
        **options: Unpack[OptionsBesidesDecoding],
    ) -> None: ...

    @overload
    def __init__(
        self,
        source: Source,
        handler: TypedAsyncHandler[T, bytes | None],
        *,
        engine: Async,
        value_deserializer: Typed[T],
        key_deserializer: Untyped = ...,
        **options: Unpack[OptionsBesidesDecoding],
    ) -> None: ...

    @overload
    def __init__(
        self,
        source: Source,
        handler: TypedAsyncHandler[bytes | None, U],
        *,
        engine: Async,
        value_deserializer: Untyped = ...,
        key_deserializer: Typed[U],
        **options: Unpack[OptionsBesidesDecoding],
    ) -> None: ...

    @overload
    def __init__(
        self,
        source: Source,
        handler: TypedAsyncHandler[T, U],
        *,
        engine: Async,
        value_deserializer: Typed[T],
        key_deserializer: Typed[U],
        **options: Unpack[OptionsBesidesDecoding],
    ) -> None: ...

    @overload
    def __init__(
        self,
        source: Source,
        handler: SyncHandler,
        *,
        engine: Sync = ...,
        value_deserializer: Untyped = ...,
        key_deserializer: Untyped = ...,
        **options: Unpack[OptionsBesidesDecoding],
    ) -> None: ...

    @overload
    def __init__(
        self,
        source: Source,
        handler: TypedSyncHandler[T, bytes | None],
        *,
        engine: Sync = ...,
        value_deserializer: Typed[T],
        key_deserializer: Untyped = ...,
        **options: Unpack[OptionsBesidesDecoding],
    ) -> None: ...

    @overload
    def __init__(
        self,
        source: Source,
        handler: TypedSyncHandler[bytes | None, U],
        *,
        engine: Sync = ...,
        value_deserializer: Untyped = ...,
        key_deserializer: Typed[U],
        **options: Unpack[OptionsBesidesDecoding],
    ) -> None: ...

    @overload
    def __init__(
        self,
        source: Source,
        handler: TypedSyncHandler[T, U],
        *,
        engine: Sync = ...,
        value_deserializer: Typed[T],
        key_deserializer: Typed[U],
        **options: Unpack[OptionsBesidesDecoding],
    ) -> None: ...

    @overload
    def __init__(
        self,
        source: Source,
        handler: TypedSyncHandler[Any, Any] | TypedAsyncHandler[Any, Any],
        *,
        engine: EngineKind,
        **options: Unpack[OptionsBesidesEngine],
    ) -> None: ...

    @overload
    def __init__(
        self,
        source: Source,
        handler: Callable[[Any, State[Any]], Any] | Callable[[list[Any], States], Any],
        *,
        state: StoreOption,
        **options: Any,
    ) -> None: ...

    def __init__(self, source: Source, handler: Callable[..., Any], **options: Any) -> None:
        self._construct(source, handler, options)

    def _construct(
        self, source: Source, handler: Callable[..., Any], options: dict[str, Any]
    ) -> None:
        raise NotImplementedError
