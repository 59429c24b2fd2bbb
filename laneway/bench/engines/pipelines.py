"""``laneway bench --batch-size N`` and ``--results``: the same runs as batch handlers and as
consume -> transform -> produce pipelines.

Each laneway engine row gets twins, run right after it on the same workload, so their
throughput ratio is measured side by side (see :mod:`laneway.bench.engines.instrumentation`):

* ``<engine>+batch``: the handler is a batch handler (``batch_size=N``). Waiting work
  (``sleep``, ``io``, ``random``) is done once per batch, as a bulk call would be (one
  round trip for N items); CPU work and recording stay per message.
* ``<engine>+results``: the handler also returns one :class:`laneway.Produce` per message
  (the input's value and key) into ``<topic>.out``, written at-least-once: the input is
  finished once its result is acknowledged.
* ``<engine>+exactly-once``: the same with ``exactly_once=True`` and
  ``commit_interval=0.1``: results and offsets in one transaction every 100 ms.
* ``<engine>+state``: the handler is a stateful one (``--state``): it counts its key's
  messages in a :class:`laneway.StateStore` (a fresh directory, changelog
  ``<topic>.state``), so each message reads and writes its key's state and writes one
  changelog record; its cost per message is the difference of the two rows' time per
  message.
* ``<engine>+batch+state``: with both ``--batch-size`` and ``--state``, the batch twin's
  handler also counts each message's key (``laneway.States``); its cost per message is
  against the ``+batch`` row, so it is what state adds to a batch handler.

The plain row is the consume-only baseline of those ratios: the same recording handler,
nothing written. With ``--results`` the raw loop gets a ``raw+results`` twin too: the bare
client reading and writing every message, no laneway (see :mod:`laneway.bench.engines.raw`), so
the table shows what a result costs the client itself next to what it costs laneway.
"""

from __future__ import annotations

import time
from typing import Any

from laneway.bench.engines.recorder import AsyncRecordedHandler, RecordedHandler, Sink
from laneway.bench.engines.workloads import AsyncWork, Inline, SyncWork
from laneway.results import Produce
from laneway.state.handler import States
from laneway.state.state import State
from laneway.types import Message

BATCH, RESULTS, EXACTLY_ONCE, STATE = "batch", "results", "exactly-once", "state"
BATCH_STATE = "batch+state"
PIPELINES = (BATCH, RESULTS, EXACTLY_ONCE, STATE, BATCH_STATE)
STATEFUL = (STATE, BATCH_STATE)
"""The twins whose handler keeps state (they need key order and a store)."""
EXACTLY_ONCE_COMMIT_INTERVAL = 0.1
"""Seconds between transactions in the exactly-once twin (the issue's reference point)."""
DEFAULT_BATCH_SIZE = 100
BULK_WORK = ("sleep", "io", "random")
"""Work kinds done once per batch by a batch handler (waiting, as a bulk call would)."""


def output_topic(topic: str) -> str:
    """Where the results twins write: ``<topic>.out``."""
    return f"{topic}.out"


def changelog_topic(topic: str) -> str:
    """Where the state twin keeps its state: ``<topic>.state``."""
    return f"{topic}.state"


def consumer_options(twin: str, batch_size: int) -> dict[str, Any]:
    """The ``Consumer`` options a twin adds."""
    if twin in (BATCH, BATCH_STATE):
        return {"batch_size": batch_size, "max_buffered": max(10_000, 4 * batch_size)}
    if twin == EXACTLY_ONCE:
        return {"exactly_once": True, "commit_interval": EXACTLY_ONCE_COMMIT_INTERVAL}
    return {}


class Transform:
    """A handler that runs ``inner`` and returns the message's result into ``out``."""

    def __init__(self, inner: RecordedHandler, out: str) -> None:
        self.inner = inner
        self.out = out

    def __call__(self, message: Message) -> Produce:
        self.inner(message)
        return Produce(self.out, message.value, message.key)


class AsyncTransform:
    """The ``async def`` twin of :class:`Transform`."""

    def __init__(self, inner: AsyncRecordedHandler, out: str) -> None:
        self.inner = inner
        self.out = out

    async def __call__(self, message: Message) -> Produce:
        await self.inner(message)
        return Produce(self.out, message.value, message.key)


class Counting:
    """A stateful handler: runs ``inner``, then adds one to its key's count."""

    def __init__(self, inner: RecordedHandler) -> None:
        self.inner = inner

    def __call__(self, message: Message, state: State[int]) -> None:
        self.inner(message)
        state.value = (state.value or 0) + 1


class AsyncCounting:
    """The ``async def`` twin of :class:`Counting`."""

    def __init__(self, inner: AsyncRecordedHandler) -> None:
        self.inner = inner

    async def __call__(self, message: Message, state: State[int]) -> None:
        await self.inner(message)
        state.value = (state.value or 0) + 1


def _count_each(batch: list[Message], states: States) -> None:
    """Add one to the count of each message's key (a batch's messages of one key share it)."""
    for message in batch:
        state = states[message]
        state.value = (state.value or 0) + 1


class BatchCounting:
    """A stateful batch handler: runs ``inner``, then adds one to each message's key count."""

    def __init__(self, inner: BatchHandler) -> None:
        self.inner = inner

    def __call__(self, batch: list[Message], states: States) -> None:
        self.inner(batch)
        _count_each(batch, states)


class AsyncBatchCounting:
    """The ``async def`` twin of :class:`BatchCounting`."""

    def __init__(self, inner: AsyncBatchHandler) -> None:
        self.inner = inner

    async def __call__(self, batch: list[Message], states: States) -> None:
        await self.inner(batch)
        _count_each(batch, states)


class BatchHandler:
    """A batch handler: bulk work once per batch (see :data:`BULK_WORK`), else per message.
    Messages are recorded one after the other (each starts where the one before ended),
    so the bench's order check sees a batch's lanes run in offset order."""

    def __init__(self, work: SyncWork, sink: Sink, bulk: bool) -> None:
        self.work = work
        self.sink = sink
        self.bulk = bulk

    def __call__(self, batch: list[Message]) -> None:
        start = time.monotonic_ns()
        if self.bulk:
            self.work(batch[0])
            _record(self.sink, batch, start)
            return
        work, add = self.work, self.sink.add
        for message in batch:
            work(message)
            end = time.monotonic_ns()
            add(message, start, end)
            start = end


class AsyncBatchHandler:
    """The ``async def`` twin of :class:`BatchHandler`."""

    def __init__(self, work: AsyncWork, sink: Sink, bulk: bool) -> None:
        self.work = work
        self.sink = sink
        self.bulk = bulk
        self._inline: SyncWork | None = work.work if isinstance(work, Inline) else None

    async def __call__(self, batch: list[Message]) -> None:
        start = time.monotonic_ns()
        if self._inline is not None:
            inline, add = self._inline, self.sink.add
            for message in batch:
                inline(message)
                end = time.monotonic_ns()
                add(message, start, end)
                start = end
            return
        if self.bulk:
            await self.work(batch[0])
        else:
            for message in batch:
                await self.work(message)
        _record(self.sink, batch, start)


def _record(sink: Sink, batch: list[Message], start: int) -> None:
    """Record ``batch`` as run one after the other from ``start`` to now."""
    add = sink.add
    for message in batch:
        end = time.monotonic_ns()
        add(message, start, end)
        start = end
