"""What wraps a handler's attempts: the handler types, the :class:`AttemptHook` protocol,
and :class:`AttemptStamp`, the hook by which a process worker tells its parent when the
current attempt started (in a shared progress array whose slots are named here).

Hooks are applied once, when the :class:`~laneway.engines.invoker.Invoker` is built; see
it for the order.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, MutableSequence
from typing import Any, Protocol

from laneway.types import Message

SyncHandler = Callable[[Any], object]
"""A plain handler: called with a message (or, with ``batch_size``, a list of them)."""
AsyncHandler = Callable[[Any], Awaitable[object]]
"""An ``async def`` handler, likewise."""

BATCH_ID = 0
INDEX = 1
STARTED = 2
"""Slots of a process worker's shared progress array: the batch being run, the message's
index in it, and when its current attempt started (``time.monotonic_ns()``, 0 between
attempts; only written when the policy has a timeout)."""
PROGRESS_SLOTS = 3


class AttemptHook(Protocol):
    """Wraps every attempt of a handler: ``wrap`` for plain functions, ``wrap_async`` for
    ``async def`` ones. A hook used by the process engine is pickled to its workers."""

    def wrap(self, handler: SyncHandler) -> SyncHandler: ...

    def wrap_async(self, handler: AsyncHandler) -> AsyncHandler: ...


class AttemptStamp:
    """An :class:`AttemptHook` for process workers with a handler timeout: writes when each
    attempt starts into the shared progress array, so the parent can kill a worker whose
    attempt runs too long."""

    def __init__(self, progress: MutableSequence[int]) -> None:
        self._progress = progress

    def wrap(self, handler: SyncHandler) -> SyncHandler:
        progress = self._progress

        def stamped(message: Message) -> object:
            progress[STARTED] = time.monotonic_ns()
            try:
                return handler(message)
            finally:
                progress[STARTED] = 0

        return stamped

    def wrap_async(self, handler: AsyncHandler) -> AsyncHandler:
        raise TypeError("process workers run plain functions only")
