"""``laneway run``'s own span exporter: the OpenTelemetry SDK configured from the standard
``OTEL_*`` variables when ``OTEL_EXPORTER_OTLP_ENDPOINT`` (or
``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``) is set (``pip install 'laneway[otlp]'``).

A library never configures the SDK: an application does. ``laneway run`` is the
application here, so it does what ``opentelemetry-instrument`` would, for traces only:
an SDK tracer provider (sampler from ``OTEL_TRACES_SAMPLER``/``_ARG``, resource from
``OTEL_SERVICE_NAME``/``OTEL_RESOURCE_ATTRIBUTES``, ``service.name`` ``laneway`` when
neither names one), a batch span processor (``OTEL_BSP_*``) and the OTLP exporter of
``OTEL_EXPORTER_OTLP_TRACES_PROTOCOL``/``OTEL_EXPORTER_OTLP_PROTOCOL``: ``http/protobuf``
(the default; ``opentelemetry-exporter-otlp-proto-http``) or ``grpc``
(``opentelemetry-exporter-otlp-proto-grpc``). The exporter reads the rest (headers,
certificates, timeout, compression) from the variables itself. Spans still buffered are
exported when the process exits normally (the SDK's exit hook); a member or worker killed
with SIGKILL loses its last ``OTEL_BSP_SCHEDULE_DELAY`` (5 s by default) of spans.

Nothing is configured when a tracer provider is already set (``opentelemetry-instrument``,
or the handler's module configured one), when ``OTEL_SDK_DISABLED`` is true, when
``OTEL_TRACES_EXPORTER`` names an exporter other than ``otlp``, or when ``--tracing off``.
Process-engine workers configure it the same way from the variables they inherit (the
attempt hook does, see :class:`~laneway.observability.tracing.TracingHook`).
"""

from __future__ import annotations

import importlib
import os
from typing import Any

from laneway.errors import ConfigError

ENDPOINTS = ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT")
PROTOCOLS = ("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL")
EXPORTERS = {
    "http/protobuf": "opentelemetry.exporter.otlp.proto.http.trace_exporter",
    "grpc": "opentelemetry.exporter.otlp.proto.grpc.trace_exporter",
}
GRPC_PACKAGE = "opentelemetry-exporter-otlp-proto-grpc"
"""Not in the ``otlp`` extra: it brings grpcio, a large native dependency."""
DEFAULT_SERVICE = "laneway"

_configured = False
"""Whether this process's tracer provider is the one :func:`export_from_environment` made."""


def exporting() -> bool:
    """Whether this process's tracer provider is the one :func:`export_from_environment`
    made (so process workers should make theirs too)."""
    return _configured


def requested() -> str | None:
    """The variable that asks for OTLP export (its name), or ``None``: no endpoint is set,
    ``OTEL_SDK_DISABLED`` is true or ``OTEL_TRACES_EXPORTER`` names another exporter."""
    if os.environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return None
    exporters = os.environ.get("OTEL_TRACES_EXPORTER", "otlp").strip().lower()
    if "otlp" not in [name.strip() for name in exporters.split(",")]:
        return None
    return next((name for name in ENDPOINTS if os.environ.get(name, "").strip()), None)


def sdk_configured() -> bool:
    """Whether an SDK tracer provider is set (the API alone only has its proxy); ``False``
    without the ``otel`` extra."""
    try:
        from opentelemetry import trace
    except ModuleNotFoundError:
        return False
    provider = trace.get_tracer_provider()
    return not isinstance(provider, (trace.ProxyTracerProvider, trace.NoOpTracerProvider))


def export_from_environment() -> bool:
    """Configure the global tracer provider to export over OTLP when the variables ask for
    it and no provider is set yet; whether this process exports that way (configured now
    or before). ConfigError, naming the variable and the package, when the SDK or the
    exporter is missing or the protocol is unknown."""
    global _configured
    if _configured:
        return True
    variable = requested()
    if variable is None:
        return False
    try:
        from opentelemetry import trace
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
    except ModuleNotFoundError as error:
        raise _missing(variable, "http/protobuf", error) from None
    if sdk_configured():
        return False  # the application (or opentelemetry-instrument) configured its own
    resource = Resource.create()
    if str(resource.attributes.get("service.name", "")).startswith("unknown_service"):
        resource = resource.merge(Resource({"service.name": DEFAULT_SERVICE}))
    provider = TracerProvider(resource=resource)
    provider.add_span_processor(BatchSpanProcessor(_exporter(variable)))
    trace.set_tracer_provider(provider)
    _configured = sdk_configured()
    return _configured


def _exporter(variable: str) -> Any:
    protocol_variable = next((name for name in PROTOCOLS if os.environ.get(name)), None)
    protocol = os.environ.get(protocol_variable or "", "http/protobuf").strip().lower()
    if protocol not in EXPORTERS:
        raise ConfigError(
            f"{protocol_variable}={protocol!r} is not valid; laneway run exports spans with "
            f"{' or '.join(EXPORTERS)}"
        )
    try:
        module = importlib.import_module(EXPORTERS[protocol])
    except ModuleNotFoundError as error:
        raise _missing(variable, protocol, error) from None
    return module.OTLPSpanExporter()


def _missing(variable: str, protocol: str, error: ModuleNotFoundError) -> ConfigError:
    extra = "" if protocol == "http/protobuf" else f" {GRPC_PACKAGE}"
    return ConfigError(
        f"{variable} is set, so laneway run exports spans over OTLP ({protocol}), but "
        f"{error.name} is missing: pip install 'laneway[otlp]'{extra} (or unset {variable}, "
        "or give --tracing off)"
    )
