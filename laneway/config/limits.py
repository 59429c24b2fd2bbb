"""The options that protect what handlers call: a rate cap and an adaptive concurrency limit."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypedDict

from laneway.options import (
    ConcurrencyLimit,
    ConcurrencyLimitName,
    OptionSpec,
    choice_of,
    names,
    option,
    positive,
)


@dataclass(frozen=True)
class LimitOptions:
    """How hard handlers may press on the database or service they call (part of
    :class:`ConsumerConfig`). Both act at one gate before each message's handler (see
    :mod:`laneway.engines.admission`); a message holds its place there through its retries."""

    max_rate: float | None = option(
        None,
        OptionSpec(
            "most messages handed to the handler per second, per consumer process (a token "
            "bucket allowing bursts of a twentieth of a second's worth); none: no cap; with "
            "the process engine each worker takes an equal share",
            positive(nullable=True),
            "number",
            "set it below what the downstream sustains at its worst; for a downstream whose "
            "speed varies, concurrency_limit=adaptive adapts where a fixed rate cannot",
            nullable=True,
        ),
    )
    concurrency_limit: ConcurrencyLimit = option(
        ConcurrencyLimit.FIXED,
        OptionSpec(
            "how many handlers may run at once: fixed (concurrency, always) or adaptive (a "
            "limit from 1 to concurrency that shrinks when handler latency grows past twice "
            "its baseline or attempts fail, and grows back while latency holds)",
            choice_of(ConcurrencyLimit),
            "choice",
            "adaptive for handlers that call a shared database or service which queues "
            "when overloaded (pair it with a timeout); thread and async engines only",
            choices=names(ConcurrencyLimit),
        ),
    )


class LimitKeywords(TypedDict, total=False):
    """The keywords of :class:`LimitOptions`, typed."""

    max_rate: float | None
    concurrency_limit: ConcurrencyLimitName | ConcurrencyLimit
