"""ConsumerConfig: every consumer option, written once, with its default, checks and help.

Each option is one field of :class:`ConsumerConfig` whose metadata holds an
:class:`~laneway.options.OptionSpec`. Everything else is derived from these fields: the
validation of ``Consumer(...)`` keywords (:meth:`ConsumerConfig.from_options`), the
options table in this class's docstring, the ``laneway run`` flags and ``LANEWAY_*``
environment variables (:func:`option_specs`). :class:`ConsumerOptions` types the
keywords for type checkers; a test keeps its keys equal to the fields.
"""

from __future__ import annotations

import dataclasses
import difflib
import os
import textwrap
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TypedDict

from laneway.errors import ConfigError
from laneway.metrics import NO_METRICS, Metrics
from laneway.options import (
    ENV_PREFIX,
    EngineKind,
    EngineName,
    EventLoop,
    EventLoopName,
    OptionSpec,
    Ordering,
    OrderingName,
    StallAction,
    StallActionName,
    TracingMode,
    TracingModeName,
    choice_of,
    duration,
    flag,
    names,
    number,
    option,
    uvloop_installed,
    whole_number,
)
from laneway.retry import RetryPolicy
from laneway.types import Failure, Message

FailureCallback = Callable[[Message, Failure], object]
"""``on_failure(message, failure)``: called after a message's last failed attempt."""

DEFAULT_CONCURRENCY = {
    EngineKind.SYNC: 1,
    EngineKind.THREAD: 64,
    EngineKind.ASYNC: 256,
    EngineKind.PROCESS: os.cpu_count() or 1,
}
"""``concurrency`` when not given: threads, coroutines or worker processes."""


def _callable_or_none(value: object, name: str) -> object:
    if value is not None and not callable(value):
        raise ConfigError(
            f"{name}={value!r} is not valid; expected a callable (message, failure) or None"
        )
    return value


def _metrics_backend(value: object, name: str) -> object:
    if value is None:
        return NO_METRICS
    for method in ("increment", "gauge", "observe"):
        if not callable(getattr(value, method, None)):
            raise ConfigError(
                f"{name}={value!r} is not valid; expected a laneway.metrics.Metrics "
                f"backend (missing {method}()) or None"
            )
    return value


def _dead_letter_topic(value: object, name: str) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not value or value.count("{") != value.count("}"):
        raise ConfigError(
            f"{name}={value!r} is not valid; expected a topic name, optionally with {{topic}} "
            "for the source topic (default '{topic}.dlq'), or None"
        )
    try:
        value.format(topic="t")
    except (KeyError, IndexError, ValueError):
        raise ConfigError(
            f"{name}={value!r} is not valid; the only placeholder is {{topic}}"
        ) from None
    return value


@dataclass(frozen=True)
class ConsumerConfig:
    """The validated, immutable options of a :class:`laneway.Consumer`.

    Build it with :meth:`from_options` (what ``Consumer(...)`` does) or directly with
    keywords; either way every value is checked in ``__post_init__``, so no config exists
    that skipped validation. Bad values raise :class:`~laneway.errors.ConfigError` naming
    the option and what is allowed.
    """

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
            "than the busy keys buys nothing; process: the core count",
            nullable=True,
            shown_default="sync 1, thread 64, async 256, process one per core",
        ),
    )
    max_buffered: int = option(
        10_000,
        OptionSpec(
            "fetched-but-unfinished messages; at the bound fetching stops, after 0.25 s the "
            "source is paused (resumed at half)",
            number(),
            "int",
            "bounds memory; must cover concurrency plus a poll or two",
        ),
    )
    commit_interval: float = option(
        1.0,
        OptionSpec(
            "seconds between commits of finished offsets",
            duration(),
            "seconds",
            "shorter: less replayed after a crash, more commit requests",
        ),
    )
    poll_batch_size: int = option(
        2_000,
        OptionSpec(
            "most messages fetched by one poll",
            number(),
            "int",
            "thousands amortise each fetch; smaller spreads the buffer more finely",
        ),
    )
    drain_timeout: float = option(
        10.0,
        OptionSpec(
            "seconds stop() and a revocation wait for running handlers",
            duration(allow_zero=True),
            "seconds",
            "keep it below the group's rebalance timeout; 0 gives up at once",
        ),
    )
    metadata_max_bytes: int = option(
        4_096,
        OptionSpec(
            "cap of the commit metadata that records finished offsets beyond the commit point",
            number(minimum=64),
            "int",
            "must not exceed the broker's offset.metadata.max.bytes; larger lets more work "
            "finish past one slow message (about 6 offsets per byte)",
        ),
    )
    handle_signals: bool = option(
        True,
        OptionSpec(
            "run() stops gracefully on SIGINT/SIGTERM (main thread only); a second aborts",
            flag,
            "bool",
        ),
    )
    stall_timeout: float = option(
        60.0,
        OptionSpec(
            "seconds a message may be in its handler before it counts as stalled: logged "
            "as a WARNING naming it and shown in stats()",
            duration(),
            "seconds",
            "above the slowest legitimate handler call, retries included",
        ),
    )
    on_stall: StallAction = option(
        StallAction.WARN,
        OptionSpec(
            "what a stall does: warn (log it, report it in stats() and /readyz) or exit "
            "(also end the process with exit code 4, so an orchestrator restarts it)",
            choice_of(StallAction),
            "choice",
            "exit when a stuck handler cannot recover by itself and a restart is cheap",
            choices=names(StallAction),
        ),
    )
    max_retries: int = option(
        3,
        OptionSpec(
            "retries of a failing handler (0: run once), holding its lane",
            number(minimum=0),
            "int",
            "retries hold the key's lane; keep max_retries x retry_backoff_max well under "
            "drain_timeout",
        ),
    )
    retry_backoff: float = option(
        0.1,
        OptionSpec(
            "first retry delay in seconds; doubles per retry, jittered (50-100%)",
            duration(allow_zero=True),
            "seconds",
        ),
    )
    retry_backoff_max: float = option(
        5.0,
        OptionSpec("longest retry delay in seconds", duration(allow_zero=True), "seconds"),
    )
    handler_timeout: float | None = option(
        None,
        OptionSpec(
            "seconds one attempt may take: async cancels it, process replaces the worker",
            duration(nullable=True),
            "seconds",
            "threads cannot be interrupted, so sync and thread engines refuse it",
            nullable=True,
        ),
    )
    dead_letter_topic: str | None = option(
        "{topic}.dlq",
        OptionSpec(
            "where messages go after their last attempt ({topic} is replaced); none: log only",
            _dead_letter_topic,
            "text",
            "created on first use with the source topic's partition count",
            nullable=True,
        ),
    )
    on_failure: FailureCallback | None = option(
        None,
        OptionSpec(
            "called with (message, failure) after the last attempt, instead of dead letters",
            _callable_or_none,
            "object",
            "if it raises it is retried with the retry backoff; the offset waits for it",
        ),
    )
    poison_threshold: int | None = option(
        None,
        OptionSpec(
            "final failures of one key that open its circuit: its next messages go straight "
            "to dead letters for poison_cooldown",
            number(nullable=True),
            "int",
            "low values isolate poison keys fast but also dead-letter a key's healthy "
            "messages during a passing outage",
            nullable=True,
        ),
    )
    poison_cooldown: float = option(
        30.0,
        OptionSpec(
            "seconds a key's circuit stays open",
            duration(),
            "seconds",
            "about as long as the outages you expect",
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
    tracing: TracingMode = option(
        TracingMode.AUTO,
        OptionSpec(
            "OpenTelemetry spans per handler attempt: auto (when an SDK is configured) or off",
            choice_of(TracingMode),
            "choice",
            "auto costs nothing without an SDK; with one, each attempt is a span",
            choices=names(TracingMode),
        ),
    )
    metrics: Metrics = option(
        None,
        OptionSpec(
            "a laneway.metrics.Metrics backend that receives the consumer's metrics",
            _metrics_backend,
            "object",
            "none: nothing is reported and nothing is computed for it",
            shown_default="None",
        ),
    )
    retry: RetryPolicy = field(init=False, repr=False, compare=False)
    """The retry options as one policy (derived)."""

    def __post_init__(self) -> None:
        for each in dataclasses.fields(self):
            spec = each.metadata.get("option")
            if spec is not None:
                object.__setattr__(self, each.name, spec.check(getattr(self, each.name), each.name))
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
        if self.handler_timeout is not None and engine in (EngineKind.SYNC, EngineKind.THREAD):
            raise ConfigError(
                f"handler_timeout={self.handler_timeout!r} is not valid with "
                f"engine={engine.value!r}: a thread cannot be interrupted; use engine='async' "
                "(the attempt is cancelled) or engine='process' (the worker is replaced)"
            )
        _check_event_loop(self.event_loop, engine)
        retry = RetryPolicy(
            self.max_retries, self.retry_backoff, self.retry_backoff_max, self.handler_timeout
        )
        object.__setattr__(self, "retry", retry)

    @classmethod
    def from_options(cls, options: Mapping[str, object]) -> ConsumerConfig:
        """A config from ``Consumer(...)`` keywords; an unknown name is a ConfigError that
        suggests the closest option."""
        known = option_specs()
        for name in options:
            if name not in known:
                raise ConfigError(unknown_option(name, known))
        config: ConsumerConfig = cls(**options)  # type: ignore[arg-type]
        return config


class ConsumerOptions(TypedDict, total=False):
    """The keywords of ``Consumer(...)``, typed (see :class:`ConsumerConfig` for each)."""

    engine: EngineName | EngineKind
    ordering: OrderingName | Ordering
    concurrency: int | None
    max_buffered: int
    commit_interval: float
    poll_batch_size: int
    drain_timeout: float
    metadata_max_bytes: int
    handle_signals: bool
    stall_timeout: float
    on_stall: StallActionName | StallAction
    max_retries: int
    retry_backoff: float
    retry_backoff_max: float
    handler_timeout: float | None
    dead_letter_topic: str | None
    on_failure: FailureCallback | None
    poison_threshold: int | None
    poison_cooldown: float
    event_loop: EventLoopName | EventLoop
    tracing: TracingModeName | TracingMode
    metrics: Metrics | None


def option_specs() -> dict[str, OptionSpec]:
    """Every consumer option's spec by name, in documentation order."""
    return {
        each.name: each.metadata["option"]
        for each in dataclasses.fields(ConsumerConfig)
        if "option" in each.metadata
    }


def option_defaults() -> dict[str, object]:
    """Every consumer option's default value by name (``None`` where it depends on others)."""
    return {
        each.name: each.default
        for each in dataclasses.fields(ConsumerConfig)
        if "option" in each.metadata
    }


def env_variable(name: str) -> str:
    """The environment variable that sets option ``name`` (``LANEWAY_CONCURRENCY``)."""
    return ENV_PREFIX + name.upper()


def unknown_option(name: str, known: Mapping[str, object]) -> str:
    """The error text for an unknown option name, with the closest valid one."""
    close = difflib.get_close_matches(name, list(known), n=1)
    hint = f"; did you mean {close[0]!r}?" if close else f"; options: {', '.join(known)}"
    return f"unknown option {name!r}{hint}"


def _check_event_loop(loop: EventLoop, engine: EngineKind) -> None:
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


def options_table() -> str:
    """Every option as a reStructuredText definition list: name, default, meaning, tuning."""
    defaults = option_defaults()
    entries = []
    for name, spec in option_specs().items():
        shown = spec.shown_default or _show(defaults[name])
        text = spec.help[0].upper() + spec.help[1:] + "."
        if spec.tuning:
            text += f" Tuning: {spec.tuning}."
        wrapped = textwrap.fill(text, 84, initial_indent="    ", subsequent_indent="    ")
        entries.append(f"``{name}`` (default {shown})\n{wrapped}")
    return "\n".join(entries)


def _show(value: object) -> str:
    if isinstance(value, (EngineKind, Ordering, EventLoop)):
        return repr(value.value)
    if isinstance(value, int) and not isinstance(value, bool) and value >= 10_000:
        return f"{value:,}"
    return repr(value)


ConsumerConfig.__doc__ = "{}\n    Options:\n\n{}\n".format(
    ConsumerConfig.__doc__, "\n".join("    " + line for line in options_table().splitlines())
)
