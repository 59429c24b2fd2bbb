"""The options that say how a consumer is watched: metrics and tracing."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypedDict

from laneway.errors import ConfigError
from laneway.metrics import NO_METRICS, Metrics
from laneway.options import (
    OptionSpec,
    TracingMode,
    TracingModeName,
    choice_of,
    names,
    option,
)


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


@dataclass(frozen=True)
class ObservingOptions:
    """Tracing and the metrics backend (part of :class:`ConsumerConfig`)."""

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


class ObservingKeywords(TypedDict, total=False):
    """The keywords of :class:`ObservingOptions`, typed."""

    tracing: TracingModeName | TracingMode
    metrics: Metrics | None
