"""Build the engine a ConsumerConfig asks for, after checking the handler fits it."""

from __future__ import annotations

import asyncio
import inspect
import threading
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

from laneway.config import ConsumerConfig
from laneway.engines.base import Engine
from laneway.engines.invoker import AttemptHook, Invoker
from laneway.errors import ConfigError
from laneway.options import EngineKind


def is_async_handler(handler: Callable[..., Any]) -> bool:
    """True for ``async def`` functions and objects whose ``__call__`` is ``async def``."""
    call = type(handler).__call__ if not inspect.isroutine(handler) else handler
    return inspect.iscoroutinefunction(handler) or inspect.iscoroutinefunction(call)


def check_handler(handler: object, engine: EngineKind) -> None:
    """Raise ConfigError when ``handler`` cannot run on ``engine``."""
    if not callable(handler):
        raise ConfigError(f"handler={handler!r} is not valid; expected a callable taking a Message")
    is_async = is_async_handler(handler)
    if engine is EngineKind.ASYNC and not is_async:
        raise ConfigError(
            "handler is a plain function but engine='async' needs an 'async def' handler; "
            "use engine='thread' for blocking handlers"
        )
    if engine is not EngineKind.ASYNC and is_async:
        raise ConfigError(
            f"handler is 'async def' but engine={engine.value!r} calls it synchronously; "
            "use engine='async'"
        )


def build_engine(
    config: ConsumerConfig,
    handler: Callable[..., Any],
    stop: threading.Event,
    loop: asyncio.AbstractEventLoop | None = None,
    hooks: Sequence[AttemptHook] = (),
) -> Engine:
    """The engine for ``config.engine``; ``loop`` is the caller's loop under ``run_async``;
    ``hooks`` wrap every handler attempt (see :class:`~laneway.engines.invoker.Invoker`)."""
    kind = config.engine
    if kind is EngineKind.PROCESS:
        from laneway.engines.process import ProcessEngine

        return ProcessEngine(handler, config.ordering, config.concurrency, config.retry, hooks)
    invoker = Invoker(handler, config.retry, hooks, is_async=kind is EngineKind.ASYNC)
    if kind is EngineKind.SYNC:
        from laneway.engines.sync import SyncEngine

        return SyncEngine(invoker, stop)
    if kind is EngineKind.THREAD:
        from laneway.engines.thread import ThreadEngine

        return ThreadEngine(invoker, config.ordering, config.concurrency)
    from laneway.engines.async_engine import AsyncEngine
    from laneway.engines.event_loops import new_event_loop

    return AsyncEngine(
        invoker,
        config.ordering,
        config.concurrency,
        loop=loop,
        loop_factory=partial(new_event_loop, config.event_loop),
    )
