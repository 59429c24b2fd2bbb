"""Deciding, once per consumer run, whether to trace (without importing OpenTelemetry when
it is off or missing), and ``laneway run``'s OTLP export (:mod:`laneway.observability.otlp`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from laneway.observability import otlp
from laneway.options import TracingMode
from laneway.sources.base import Source

if TYPE_CHECKING:
    from laneway.observability.tracing import Tracing


def export_spans(mode: TracingMode) -> bool:
    """For ``laneway run``, before the handler is imported: configure the OpenTelemetry SDK
    to export spans over OTLP when ``OTEL_EXPORTER_OTLP_ENDPOINT`` (or its ``TRACES``
    variant) asks for it, ``mode`` is not off and no tracer provider is set; whether it
    did. A library's ``Consumer`` never calls this: the application configures the SDK."""
    if mode is TracingMode.OFF or otlp.requested() is None:
        return False  # decided without importing OpenTelemetry
    return otlp.export_from_environment()


def start_tracing(mode: TracingMode, source: Source) -> Tracing | None:
    """The tracing of a run on ``source``, or ``None``: ``mode`` is off, the
    ``opentelemetry-api`` package is missing, or no SDK tracer provider is configured."""
    if mode is TracingMode.OFF:
        return None
    try:
        from laneway.observability.otlp import sdk_configured
        from laneway.observability.tracing import Tracing
    except ModuleNotFoundError:
        return None
    if not sdk_configured():
        return None
    system = source.name.partition(":")[0]
    group = source.group
    return Tracing("kafka" if system == "kafka" else f"laneway-{system}", group, otlp.exporting())
