"""ConsumerConfig: every consumer option, its documented default, and its validation."""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from laneway.engines.event_loops import uvloop_installed
from laneway.errors import ConfigError
from laneway.options import EngineKind, EventLoop, Ordering, choice, seconds, whole_number
from laneway.retry import RetryPolicy

DEFAULT_CONCURRENCY = {
    EngineKind.SYNC: 1,
    EngineKind.THREAD: 64,
    EngineKind.ASYNC: 256,
    EngineKind.PROCESS: os.cpu_count() or 1,
}
"""``concurrency`` when not given: threads, coroutines or worker processes."""


@dataclass(frozen=True)
class ConsumerConfig:
    """The validated, immutable options of a :class:`laneway.Consumer`.

    ========================  ==================  =============================================
    option                    default             meaning
    ========================  ==================  =============================================
    ``engine``                ``"thread"``        sync | thread | async | process
    ``ordering``              ``"key"``           key | partition | unordered
    ``concurrency``           per engine          max handlers running at once (sync 1, thread
                                                  64, async 256, process one per core)
    ``max_buffered``          10,000              fetched-but-unfinished messages; at the
                                                  bound fetching stops, after 0.25 s there
                                                  the source is paused (resumed at half)
    ``commit_interval``       1.0 s               how often finished offsets are committed
    ``poll_batch_size``       2,000               most messages fetched by one poll
    ``drain_timeout``         10.0 s              how long stop() and a revocation wait for
                                                  running handlers before giving up on them
    ``metadata_max_bytes``    4,096               commit-metadata cap (the broker's
                                                  ``offset.metadata.max.bytes``)
    ``handle_signals``        True                run() stops on SIGINT/SIGTERM (main thread)
    ``max_retries``           3                   retries of a failing handler (0: run once)
    ``retry_backoff``         0.1 s               first retry delay; doubles per retry,
                                                  jittered, capped by ``retry_backoff_max``
    ``retry_backoff_max``     5.0 s               longest retry delay
    ``handler_timeout``       None                seconds one attempt may take (async and
                                                  process engines; see Consumer)
    ``dead_letter_topic``     ``"{topic}.dlq"``   where messages go after their last attempt
                                                  (``{topic}`` is replaced); None: log only
    ``poison_threshold``      None                final failures of one key that open its
                                                  circuit: its next messages go straight to
                                                  dead letters for ``poison_cooldown``
    ``poison_cooldown``       30.0 s              how long a key's circuit stays open
    ``event_loop``            ``"auto"``          the async engine's own loop under run():
                                                  auto (uvloop if installed) | asyncio |
                                                  uvloop; see :class:`EventLoop`
    ========================  ==================  =============================================
    """

    engine: EngineKind = EngineKind.THREAD
    ordering: Ordering = Ordering.KEY
    concurrency: int = 64
    max_buffered: int = 10_000
    commit_interval: float = 1.0
    poll_batch_size: int = 2_000
    drain_timeout: float = 10.0
    metadata_max_bytes: int = 4_096
    handle_signals: bool = True
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    dead_letter_topic: str | None = "{topic}.dlq"
    poison_threshold: int | None = None
    poison_cooldown: float = 30.0
    event_loop: EventLoop = EventLoop.AUTO

    @classmethod
    def build(
        cls,
        *,
        engine: object = "thread",
        ordering: object = "key",
        concurrency: object = None,
        max_buffered: object = 10_000,
        commit_interval: object = 1.0,
        poll_batch_size: object = 2_000,
        drain_timeout: object = 10.0,
        metadata_max_bytes: object = 4_096,
        handle_signals: object = True,
        max_retries: object = 3,
        retry_backoff: object = 0.1,
        retry_backoff_max: object = 5.0,
        handler_timeout: object = None,
        dead_letter_topic: object = "{topic}.dlq",
        poison_threshold: object = None,
        poison_cooldown: object = 30.0,
        event_loop: object = "auto",
    ) -> ConsumerConfig:
        """Validate raw option values; every error names the option and what is allowed."""
        kind = choice(EngineKind, engine, "engine")
        if concurrency is None:
            workers = DEFAULT_CONCURRENCY[kind]
        else:
            most = 4 * (os.cpu_count() or 1) if kind is EngineKind.PROCESS else 100_000
            workers = whole_number(concurrency, "concurrency", minimum=1, maximum=most)
            if kind is EngineKind.SYNC and workers != 1:
                raise ConfigError(
                    f"concurrency={workers!r} is not valid with engine='sync', which runs one "
                    "message at a time; use engine='thread', 'async' or 'process' for more"
                )
        if not isinstance(handle_signals, bool):
            raise ConfigError(
                f"handle_signals={handle_signals!r} is not valid; expected True or False"
            )
        return cls(
            engine=kind,
            ordering=choice(Ordering, ordering, "ordering"),
            concurrency=workers,
            max_buffered=whole_number(max_buffered, "max_buffered", minimum=1),
            commit_interval=seconds(commit_interval, "commit_interval"),
            poll_batch_size=whole_number(poll_batch_size, "poll_batch_size", minimum=1),
            drain_timeout=seconds(drain_timeout, "drain_timeout", allow_zero=True),
            metadata_max_bytes=whole_number(metadata_max_bytes, "metadata_max_bytes", minimum=64),
            handle_signals=handle_signals,
            retry=RetryPolicy(
                max_retries=whole_number(max_retries, "max_retries", minimum=0),
                backoff=seconds(retry_backoff, "retry_backoff", allow_zero=True),
                backoff_max=seconds(retry_backoff_max, "retry_backoff_max", allow_zero=True),
                timeout=_handler_timeout(handler_timeout, kind),
            ),
            dead_letter_topic=_dead_letter_topic(dead_letter_topic),
            poison_threshold=(
                None
                if poison_threshold is None
                else whole_number(poison_threshold, "poison_threshold", minimum=1)
            ),
            poison_cooldown=seconds(poison_cooldown, "poison_cooldown"),
            event_loop=_event_loop(event_loop, kind),
        )


def _handler_timeout(value: object, engine: EngineKind) -> float | None:
    if value is None:
        return None
    timeout = seconds(value, "handler_timeout")
    if engine in (EngineKind.SYNC, EngineKind.THREAD):
        raise ConfigError(
            f"handler_timeout={value!r} is not valid with engine={engine.value!r}: a thread "
            "cannot be interrupted; use engine='async' (the attempt is cancelled) or "
            "engine='process' (the worker is replaced)"
        )
    return timeout


def _event_loop(value: object, engine: EngineKind) -> EventLoop:
    loop = choice(EventLoop, value, "event_loop")
    if loop is EventLoop.AUTO:
        return loop
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
    return loop


def _dead_letter_topic(value: object) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not value or value.count("{") != value.count("}"):
        raise ConfigError(
            f"dead_letter_topic={value!r} is not valid; expected a topic name, optionally "
            "with {topic} for the source topic (default '{topic}.dlq'), or None"
        )
    try:
        value.format(topic="t")
    except (KeyError, IndexError, ValueError):
        raise ConfigError(
            f"dead_letter_topic={value!r} is not valid; the only placeholder is {{topic}}"
        ) from None
    return value
