"""``laneway run``'s OTLP export (laneway.observability.otlp): when the ``OTEL_*`` variables
ask for it, what it configures, and when it leaves the SDK alone."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.util._once import Once

from laneway.errors import ConfigError
from laneway.observability import otlp
from laneway.observability.start import export_spans, start_tracing
from laneway.options import TracingMode
from laneway.sources.embedded.log import EmbeddedLog

VARIABLES = (
    *otlp.ENDPOINTS,
    *otlp.PROTOCOLS,
    "OTEL_SDK_DISABLED",
    "OTEL_TRACES_EXPORTER",
    "OTEL_SERVICE_NAME",
    "OTEL_RESOURCE_ATTRIBUTES",
)


@pytest.fixture(autouse=True)
def fresh_provider(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """No tracer provider set, none of the variables set, and laneway's flag cleared; the
    provider a test makes is shut down after it (its export thread with it)."""
    for name in VARIABLES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(trace, "_TRACER_PROVIDER", None)
    monkeypatch.setattr(trace, "_TRACER_PROVIDER_SET_ONCE", Once())
    monkeypatch.setattr(otlp, "_configured", False)
    yield
    provider = trace._TRACER_PROVIDER
    if isinstance(provider, TracerProvider):
        provider.shutdown()


def test_nothing_is_asked_for_without_an_endpoint() -> None:
    assert otlp.requested() is None
    assert export_spans(TracingMode.AUTO) is False
    assert not isinstance(trace.get_tracer_provider(), TracerProvider)


@pytest.mark.parametrize(
    ("settings", "asked"),
    [
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}, "OTEL_EXPORTER_OTLP_ENDPOINT"),
        (
            {"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://127.0.0.1:4318/v1/traces"},
            "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
        ),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://x", "OTEL_SDK_DISABLED": "true"}, None),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://x", "OTEL_TRACES_EXPORTER": "console"}, None),
        (
            {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://x", "OTEL_TRACES_EXPORTER": "console,otlp"},
            "OTEL_EXPORTER_OTLP_ENDPOINT",
        ),
    ],
)
def test_which_variables_ask_for_the_export(
    monkeypatch: pytest.MonkeyPatch, settings: dict[str, str], asked: str | None
) -> None:
    for name, value in settings.items():
        monkeypatch.setenv(name, value)
    assert otlp.requested() == asked


def test_an_endpoint_configures_the_sdk_with_the_otlp_http_exporter(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:1")
    assert export_spans(TracingMode.AUTO) is True
    provider = trace.get_tracer_provider()
    assert isinstance(provider, TracerProvider)
    assert provider.resource.attributes["service.name"] == "laneway"
    (processor,) = provider._active_span_processor._span_processors
    exporter = getattr(processor, "span_exporter", None) or processor._batch_processor._exporter
    assert type(exporter).__module__ == otlp.EXPORTERS["http/protobuf"]
    assert exporter._endpoint == "http://127.0.0.1:1/v1/traces"
    assert otlp.exporting() and export_spans(TracingMode.AUTO) is True  # once, then kept


def test_the_service_name_comes_from_the_standard_variable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:1")
    monkeypatch.setenv("OTEL_SERVICE_NAME", "billing")
    export_spans(TracingMode.AUTO)
    provider = trace.get_tracer_provider()
    assert isinstance(provider, TracerProvider)
    assert provider.resource.attributes["service.name"] == "billing"


def test_tracing_off_or_a_provider_already_set_leaves_the_sdk_alone(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:1")
    assert export_spans(TracingMode.OFF) is False
    assert not isinstance(trace.get_tracer_provider(), TracerProvider)
    own = TracerProvider()
    trace.set_tracer_provider(own)
    assert export_spans(TracingMode.AUTO) is False
    assert trace.get_tracer_provider() is own
    assert not otlp.exporting()


@pytest.mark.parametrize(
    ("protocol", "expected"),
    [
        ("bogus", "OTEL_EXPORTER_OTLP_PROTOCOL='bogus' is not valid"),
        ("grpc", "pip install 'laneway[otlp]' opentelemetry-exporter-otlp-proto-grpc"),
    ],
)
def test_an_unknown_protocol_or_a_missing_exporter_is_a_config_error(
    monkeypatch: pytest.MonkeyPatch, protocol: str, expected: str
) -> None:
    pytest.importorskip("opentelemetry.exporter.otlp.proto.http")
    if protocol == "grpc" and _installed("opentelemetry.exporter.otlp.proto.grpc"):
        pytest.skip("the gRPC exporter is installed here")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:1")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_PROTOCOL", protocol)
    with pytest.raises(ConfigError) as raised:
        export_spans(TracingMode.AUTO)
    assert expected in str(raised.value)


def test_the_attempt_hook_tells_process_workers_to_export_too(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:1")
    log = EmbeddedLog()
    log.create_topic("t", 1)
    source = log.subscribe(["t"], "g")
    own = TracerProvider()
    trace.set_tracer_provider(own)
    tracing = start_tracing(TracingMode.AUTO, source)
    assert tracing is not None and tracing.hook.export is False  # the application's SDK
    monkeypatch.setattr(otlp, "_configured", True)
    tracing = start_tracing(TracingMode.AUTO, source)
    assert tracing is not None and tracing.hook.export is True
    log.close()


def _installed(module: str) -> bool:
    try:
        __import__(module)
    except ImportError:
        return False
    return True
