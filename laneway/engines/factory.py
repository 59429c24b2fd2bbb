"""Build the engine a ConsumerConfig asks for."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

from laneway.config import ConsumerConfig
from laneway.engines.admission.gate import AsyncGate, Limits, ThreadGate
from laneway.engines.attempts import AttemptHook
from laneway.engines.base import Engine
from laneway.engines.invoker import Invoker
from laneway.metrics import NO_METRICS
from laneway.options import ConcurrencyLimit, EngineKind


def build_engine(
    config: ConsumerConfig,
    handler: Callable[..., Any],
    stop: threading.Event,
    loop: asyncio.AbstractEventLoop | None = None,
    hooks: Sequence[AttemptHook] = (),
    gate: ThreadGate | AsyncGate | None = None,
) -> Engine:
    """The engine for ``config.engine``; ``loop`` is the caller's loop under ``run_async``;
    ``hooks`` wrap every handler attempt (see :class:`~laneway.engines.invoker.Invoker`);
    handler times are measured when a metrics backend is configured; ``gate`` enforces
    ``max_rate`` and ``concurrency_limit`` (see :func:`limits_of`); process workers build
    their own, each with its share of the rate."""
    kind = config.engine
    timed = config.metrics is not NO_METRICS
    batch_wait = config.batch_wait or 0.0
    if kind is EngineKind.PROCESS:
        from laneway.engines.process.engine import ProcessEngine

        return ProcessEngine(
            handler,
            config.ordering,
            config.concurrency,
            config.retry,
            hooks,
            timed,
            config.batch_size,
            batch_wait,
            limits_of(config).shared_by(config.concurrency),
            config.null_keys,
        )
    invoker = Invoker(
        handler, config.retry, hooks, kind is EngineKind.ASYNC, timed, config.batch_size, gate
    )
    if kind is EngineKind.SYNC:
        from laneway.engines.sync import SyncEngine

        return SyncEngine(invoker, stop)
    if kind is EngineKind.THREAD:
        from laneway.engines.thread import ThreadEngine

        return ThreadEngine(
            invoker,
            config.ordering,
            config.concurrency,
            batch_wait=batch_wait,
            stall_timeout=config.stall_timeout,
            null_keys=config.null_keys,
        )
    from laneway.engines.async_engine import AsyncEngine
    from laneway.engines.event_loops import new_event_loop

    return AsyncEngine(
        invoker,
        config.ordering,
        config.concurrency,
        loop=loop,
        loop_factory=partial(new_event_loop, config.event_loop),
        batch_wait=batch_wait,
        stall_timeout=config.stall_timeout,
        null_keys=config.null_keys,
    )


def limits_of(config: ConsumerConfig) -> Limits:
    """The limits a config asks for (``Limits.active`` False: none); build the gate that
    enforces them with :func:`laneway.engines.admission.gate.gate_for`."""
    adaptive = config.concurrency_limit is ConcurrencyLimit.ADAPTIVE
    return Limits(config.max_rate, adaptive, config.concurrency)
