"""Resources a handler opens once per worker: its ``open()`` and ``close()`` methods.

A handler may be an object with ``open()`` and ``close()`` methods besides
``__call__``: laneway calls ``open()`` once per worker before the first message and
``close()`` once after the last, on every engine. A *worker* is the consumer's process
for the sync, thread and async engines (one handler object shared by all its threads or
coroutines, so the resource must be safe to share, as connection pools are), and each
worker process for the process engine (the handler object is pickled to it, and each
process opens its own). With the async engine the methods may be ``async def`` and run on
the engine's event loop; with the other engines they must be plain methods.

::

    class Reservations:
        async def open(self) -> None:
            self.pool = await asyncpg.create_pool(DSN)

        async def close(self) -> None:
            await self.pool.close()

        async def __call__(self, message: laneway.Message) -> None:
            async with self.pool.acquire() as connection: ...

    handler = Reservations()   # laneway run myapp.handlers:handler --engine async

If ``open()`` raises, the consumer does not start (the error names the handler); if
``close()`` raises, the error is logged and shutdown goes on. ``close()`` runs once per
worker also when SIGTERM or SIGINT reaches every process of the group (systemd, ``timeout``,
``kill -TERM -PGID``): process-engine workers leave signals to the consumer, which drains
them first. It does not run in a worker the consumer had to kill: one whose handler was
still running when ``drain_timeout`` ran out, or one replaced after ``handler_timeout``.
"""

from __future__ import annotations

import inspect
import types
from collections.abc import Callable
from dataclasses import dataclass

from laneway.errors import ConfigError
from laneway.logs import get_logger

log = get_logger(__name__)

_FUNCTIONS = (types.FunctionType, types.BuiltinFunctionType, types.MethodType, type)


@dataclass(frozen=True)
class Lifecycle:
    """A handler's ``open`` and ``close`` methods (``None`` for a plain function)."""

    open: Callable[[], object] | None = None
    close: Callable[[], object] | None = None

    @classmethod
    def of(cls, handler: object) -> Lifecycle:
        """The lifecycle of ``handler``; a ConfigError if it has only one of the two."""
        if isinstance(handler, _FUNCTIONS) or not callable(handler):
            return cls()
        opener = getattr(type(handler), "open", None)
        closer = getattr(type(handler), "close", None)
        if opener is None and closer is None:
            return cls()
        if not callable(opener) or not callable(closer):
            missing = "close" if callable(opener) else "open"
            raise ConfigError(
                f"handler {handler!r} has {'open' if missing == 'close' else 'close'}() but "
                f"no {missing}(); a handler with resources defines both (see "
                "laneway.engines.lifecycle)"
            )
        return cls(getattr(handler, "open"), getattr(handler, "close"))  # noqa: B009

    def check(self, handler: object, runs_async: bool) -> None:
        """Refuse ``async def`` methods where no event loop runs them."""
        if runs_async:
            return
        for method in (self.open, self.close):
            if method is not None and inspect.iscoroutinefunction(method):
                raise ConfigError(
                    f"handler {handler!r} has 'async def {method.__name__}()' but only "
                    "engine='async' runs an event loop; make it a plain method"
                )

    def open_now(self) -> None:
        """Call ``open()`` (plain method); its error propagates."""
        if self.open is not None:
            self.open()

    def close_now(self) -> None:
        """Call ``close()`` (plain method); an error is logged, not raised."""
        if self.close is not None:
            try:
                self.close()
            except Exception:
                log.exception("the handler's close() failed")

    async def open_async(self) -> None:
        """Call ``open()`` and await it when it is ``async def``."""
        if self.open is not None:
            result = self.open()
            if inspect.isawaitable(result):
                await result

    async def close_async(self) -> None:
        """Call ``close()`` and await it when it is ``async def``; errors are logged."""
        if self.close is not None:
            try:
                result = self.close()
                if inspect.isawaitable(result):
                    await result
            except Exception:
                log.exception("the handler's close() failed")
