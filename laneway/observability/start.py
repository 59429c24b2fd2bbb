"""Deciding, once per consumer run, whether to trace (without importing OpenTelemetry when
it is off or missing)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from laneway.options import TracingMode
from laneway.sources.base import Source

if TYPE_CHECKING:
    from laneway.observability.tracing import Tracing


def start_tracing(mode: TracingMode, source: Source) -> Tracing | None:
    """The tracing of a run on ``source``, or ``None``: ``mode`` is off, the
    ``opentelemetry-api`` package is missing, or no SDK tracer provider is configured."""
    if mode is TracingMode.OFF:
        return None
    try:
        from laneway.observability.tracing import Tracing, sdk_configured
    except ModuleNotFoundError:
        return None
    if not sdk_configured():
        return None
    system = source.name.partition(":")[0]
    return Tracing("kafka" if system == "kafka" else f"laneway-{system}", source.group)
