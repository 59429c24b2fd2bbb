"""The options that say where and how handlers run: engine, ordering, concurrency, loop."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TypedDict

from laneway.errors import ConfigError
from laneway.options import (
    EngineKind,
    EngineName,
    EventLoop,
    EventLoopName,
    OptionSpec,
    Ordering,
    OrderingName,
    choice_of,
    duration,
    names,
    number,
    option,
    uvloop_installed,
    whole_number,
)

DEFAULT_CONCURRENCY = {
    EngineKind.SYNC: 1,
    EngineKind.THREAD: 64,
    EngineKind.ASYNC: 256,
    EngineKind.PROCESS: os.cpu_count() or 1,
}
"""``concurrency`` when not given: threads, coroutines or worker processes."""

DEFAULT_BATCH_WAIT = 0.05
"""``batch_wait`` when ``batch_size`` is given without it (seconds)."""


@dataclass(frozen=True)
class RunningOptions:
    """Where handlers run and how many at once (part of :class:`ConsumerConfig`)."""

    engine: EngineKind = option(
        EngineKind.THREAD,
        OptionSpec(
            "where handlers run",
            choice_of(EngineKind),
            "choice",
            "sync for trivial work, thread for blocking I/O, async for async def handlers, "
            "process for CPU-bound work (see laneway bench)",
            choices=names(EngineKind),
        ),
    )
    ordering: Ordering = option(
        Ordering.KEY,
        OptionSpec(
            "which messages must not overlap and must run in offset order",
            choice_of(Ordering),
            "choice",
            "key keeps per-key order and runs keys in parallel; partition serialises each "
            "partition; unordered has no constraint",
            choices=names(Ordering),
        ),
    )
    concurrency: int = option(
        None,
        OptionSpec(
            "most handlers running at once (threads, coroutines or worker processes)",
            number(nullable=True),
            "int",
            "for I/O of latency L at throughput T use at least T x L; with ordering=key more "
            "than the busy keys buys nothing; process: the core count; never above "
            "max_buffered (an error: those handlers could never run)",
            nullable=True,
            shown_default="sync 1, thread 64, async 256, process one per core; at most "
            "max_buffered",
        ),
    )
    event_loop: EventLoop = option(
        EventLoop.AUTO,
        OptionSpec(
            "the async engine's own loop under run(): auto (uvloop if installed), asyncio, uvloop",
            choice_of(EventLoop),
            "choice",
            "uvloop wakes timers more precisely (about 13% more 5 ms sleeps a second here)",
            choices=names(EventLoop),
        ),
    )

    batch_size: int | None = option(
        None,
        OptionSpec(
            "call the handler with a list of up to this many messages (a batch handler); "
            "none: one message per call",
            number(nullable=True),
            "int",
            "the size your bulk write likes (an INSERT of 500 rows); batches fill from many "
            "keys at once, a key's messages in offset order, a key in one batch at a time",
            nullable=True,
        ),
    )
    batch_wait: float | None = option(
        None,
        OptionSpec(
            "seconds a batch may wait to fill up to batch_size before it runs with fewer",
            duration(allow_zero=True, nullable=True),
            "seconds",
            "longer fills batches under light load at the price of latency; 0 runs what "
            "is there (the sync engine batches what one poll returned)",
            nullable=True,
            shown_default="0.05 with batch_size",
        ),
    )

    def _check_running(self) -> None:
        """The checks between these options (each value is checked on its own first)."""
        if self.batch_size is None:
            if self.batch_wait is not None:
                raise ConfigError(
                    f"batch_wait={self.batch_wait!r} is not valid without batch_size: it is "
                    "how long a batch waits to fill; set batch_size too (e.g. batch_size=500)"
                )
        elif self.batch_wait is None:
            object.__setattr__(self, "batch_wait", DEFAULT_BATCH_WAIT)
        engine = self.engine
        if self.concurrency is None:
            object.__setattr__(self, "concurrency", DEFAULT_CONCURRENCY[engine])
        elif engine is EngineKind.PROCESS:
            whole_number(self.concurrency, "concurrency", maximum=4 * (os.cpu_count() or 1))
        elif engine is EngineKind.SYNC and self.concurrency != 1:
            raise ConfigError(
                f"concurrency={self.concurrency!r} is not valid with engine='sync', which runs "
                "one message at a time; use engine='thread', 'async' or 'process' for more"
            )
        else:
            whole_number(self.concurrency, "concurrency", maximum=100_000)
        loop = self.event_loop
        if loop is EventLoop.AUTO:
            return
        if engine is not EngineKind.ASYNC:
            raise ConfigError(
                f"event_loop={loop.value!r} is not valid with engine={engine.value!r}: only "
                "engine='async' runs an event loop"
            )
        if loop is EventLoop.UVLOOP and not uvloop_installed():
            raise ConfigError(
                "event_loop='uvloop' needs the uvloop package: pip install 'laneway[uvloop]' "
                "(or use event_loop='asyncio')"
            )


class EngineKeyword(TypedDict, total=False):
    """The ``engine`` keyword, typed. Apart from :class:`RunningKeywords` because
    ``Consumer``'s overloads pick the handler type by it (see :mod:`laneway.consumer`)."""

    engine: EngineName | EngineKind


class RunningKeywords(TypedDict, total=False):
    """The keywords of :class:`RunningOptions` but ``engine``, typed."""

    ordering: OrderingName | Ordering
    concurrency: int | None
    event_loop: EventLoopName | EventLoop
    batch_size: int | None
    batch_wait: float | None
