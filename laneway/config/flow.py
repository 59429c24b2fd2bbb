"""The options that say how messages flow: buffering, polling, committing and stopping."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol, TypedDict

from laneway.errors import ConfigError
from laneway.options import OptionSpec, duration, flag, number, option


class StoreOption(Protocol):
    """What the config knows of a :class:`laneway.StateStore`, the ``state`` option's
    value (the config sits below :mod:`laneway.state`, which reads the rest)."""

    changelog: str

    def table(self, pid: Any, group: str) -> Any: ...


def _store(value: object, name: str) -> object:
    """A :class:`laneway.StateStore` or ``None`` (checked by what it has: the config sits
    below the state package)."""
    if value is None or (hasattr(value, "changelog") and hasattr(value, "table")):
        return value
    raise ConfigError(
        f"{name}={value!r:.60} is not valid; expected a laneway.StateStore(path, "
        "changelog=TOPIC) or None"
    )


@dataclass(frozen=True)
class FlowOptions:
    """How much is fetched and buffered, when progress is committed, how a stop drains
    (part of :class:`ConsumerConfig`)."""

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
    max_buffered_bytes: int = option(
        256 * 1024 * 1024,
        OptionSpec(
            "bytes (values + keys + headers) of fetched-but-unfinished messages; at the bound "
            "fetching stops and, as at max_buffered, the source is paused (resumed at half); "
            "Kafka's prefetch is sized from it (a quarter for librdkafka's queue)",
            number(minimum=1024),
            "int",
            "bounds memory when messages are large: the process holds at most about 1.25x "
            "this plus one fetch (>= 1 MB) and a constant; the default (256 MiB) keeps "
            "librdkafka's own prefetch defaults",
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
    exactly_once: bool = option(
        False,
        OptionSpec(
            "write handler results (laneway.Produce) and commit the consumed offsets in one "
            "transaction, so read_committed readers see each result exactly once",
            flag,
            "bool",
            "each commit is a transaction: a shorter commit_interval shows results sooner "
            "and costs more (see laneway bench --results); Kafka or the embedded log only",
        ),
    )
    state: StoreOption | None = option(
        None,
        OptionSpec(
            "a laneway.StateStore: the handler is called as handler(message, state) with its "
            "key's laneway.State, kept in a compacted changelog topic (laneway run: "
            "--state-dir and --state-changelog)",
            _store,
            "object",
            "see the stateful-handlers guide: restore cost, checkpoints, sizing",
            shown_default="None",
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
    tune_gc: bool = option(
        True,
        OptionSpec(
            "while running, Python's youngest garbage-collector generation holds 8 objects "
            "per max_buffered message (at most 100,000; never lowered; put back after)",
            flag,
            "bool",
            "Python's default (700) walks the whole buffer every few hundred messages: "
            "10-20% of the CPU of a run with results; turn off when the process sets its "
            "own thresholds (see laneway.gc_tuning)",
        ),
    )


class FlowKeywords(TypedDict, total=False):
    """The keywords of :class:`FlowOptions`, typed."""

    max_buffered: int
    max_buffered_bytes: int
    commit_interval: float
    poll_batch_size: int
    drain_timeout: float
    metadata_max_bytes: int
    exactly_once: bool
    state: StoreOption | None
    handle_signals: bool
    tune_gc: bool
