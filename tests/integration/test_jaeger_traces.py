"""``laneway run`` exporting its spans to a real Jaeger the standard way
(``OTEL_EXPORTER_OTLP_ENDPOINT``), read back from Jaeger's HTTP query API (``/api/v3``).

A traced producer writes three records, each inside a ``send <topic>`` PRODUCER span whose
``traceparent`` the record carries: ``ok``, ``flaky`` (its first attempt fails) and
``poison`` (every attempt fails, so it is dead-lettered). ``laneway run`` consumes them on
each engine, process workers included, and every trace must come back whole: the
producer's span, laneway's ``process <topic>`` spans as its children, the handler's spans
under them, a failed attempt as an error span with an ``exception`` event, and the dead
letter's ``send <topic>.dlq`` span in the same trace, after the last failed attempt, with
the dead-letter record carrying its context.
"""

from __future__ import annotations

import base64
import json
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from kafka_helpers import create_topic, produce, read_records, unique_name
from opentelemetry import propagate, trace
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from service_runs import SUPPORT, Service, wait_until

pytestmark = [pytest.mark.kafka, pytest.mark.jaeger, pytest.mark.timeout(180)]

HANDLERS = {
    "sync": "jaeger_app:handle",
    "thread": "jaeger_app:handle",
    "async": "jaeger_app:handle_async",
    "process": "jaeger_app:handle",
}
EXPECTED_SPANS = {"ok": 4, "flaky": 7, "poison": 8}
"""send + (process + handle + SELECT 1) per attempt (+ the dead letter's send)."""
TRACE_WAIT_S = 60.0
KINDS = {1: "INTERNAL", 2: "SERVER", 3: "CLIENT", 4: "PRODUCER", 5: "CONSUMER"}
"""OTLP's span kinds, as numbers in Jaeger's JSON."""

Span = dict[str, Any]


def _hex(value: str) -> str:
    """An id as Jaeger's JSON gives it (hex, or base64 bytes), as lower-case hex."""
    if len(value) in (16, 32) and all(c in "0123456789abcdefABCDEF" for c in value):
        return value.lower()
    return base64.b64decode(value).hex()


def _value(attribute: dict[str, Any]) -> Any:
    (kind, value), *_ = attribute["value"].items()
    return int(value) if kind == "intValue" else value


def fetch_trace(query: str, trace_id: str) -> list[Span]:
    """The spans of ``trace_id`` from Jaeger's ``GET /api/v3/traces/<id>``, flattened
    (empty while Jaeger has none)."""
    try:
        with urllib.request.urlopen(f"{query}/api/v3/traces/{trace_id}", timeout=10) as reply:
            document = json.load(reply)
    except urllib.error.HTTPError as error:
        if error.code == 404:
            return []
        raise
    spans = []
    for resource_spans in document["result"]["resourceSpans"]:
        resource = {a["key"]: _value(a) for a in resource_spans["resource"]["attributes"]}
        for scope_spans in resource_spans["scopeSpans"]:
            for span in scope_spans["spans"]:
                spans.append(
                    {
                        "name": span["name"],
                        "kind": KINDS.get(span["kind"], span["kind"]),
                        "span": _hex(span["spanId"]),
                        "parent": _hex(span["parentSpanId"]) if span.get("parentSpanId") else None,
                        "start": int(span["startTimeUnixNano"]),
                        "end": int(span["endTimeUnixNano"]),
                        "service": resource["service.name"],
                        "error": span.get("status", {}).get("code") in (2, "STATUS_CODE_ERROR"),
                        "events": [
                            (e["name"], {a["key"]: _value(a) for a in e.get("attributes", [])})
                            for e in span.get("events", [])
                        ],
                        "attributes": {a["key"]: _value(a) for a in span.get("attributes", [])},
                    }
                )
    return spans


def _produce_traced(bootstrap: str, topic: str, otlp_http: str) -> dict[str, tuple[str, str]]:
    """Produce ok, flaky and poison, each inside its own ``send`` span (exported to Jaeger
    as service ``jaeger-test-producer``); each value's (trace id, send span id)."""
    provider = TracerProvider(resource=Resource.create({"service.name": "jaeger-test-producer"}))
    provider.add_span_processor(SimpleSpanProcessor(OTLPSpanExporter(f"{otlp_http}/v1/traces")))
    tracer = provider.get_tracer("jaeger-test")
    ids: dict[str, tuple[str, str]] = {}
    records = []
    for value in EXPECTED_SPANS:
        with tracer.start_as_current_span(
            f"send {topic}", kind=trace.SpanKind.PRODUCER, attributes={"test.value": value}
        ) as span:
            carrier: dict[str, str] = {}
            propagate.inject(carrier)
            context = span.get_span_context()
            ids[value] = (f"{context.trace_id:032x}", f"{context.span_id:016x}")
        records.append((value.encode(), value.encode(), list(carrier.items())))
    produce(bootstrap, topic, records)
    provider.shutdown()
    return ids


def _attempts(spans: list[Span], topic: str) -> list[Span]:
    return sorted((s for s in spans if s["name"] == f"process {topic}"), key=lambda s: s["start"])


def _assert_handler_spans_under(spans: list[Span], attempt: Span, value: str) -> None:
    (handle,) = [s for s in spans if s["parent"] == attempt["span"]]
    assert handle["name"] == f"handle {value}"
    (query,) = [s for s in spans if s["parent"] == handle["span"]]
    assert (query["name"], query["kind"]) == ("SELECT 1", "CLIENT")
    assert attempt["start"] <= handle["start"] <= query["start"] <= query["end"] <= attempt["end"]


@pytest.mark.parametrize("engine", list(HANDLERS))
def test_a_trace_runs_from_the_producer_through_laneway_into_the_handler(
    engine: str, kafka_bootstrap: str, jaeger_endpoints: dict[str, str], tmp_path: Path
) -> None:
    topic = unique_name(f"jaeger-{engine}")
    create_topic(kafka_bootstrap, topic, 1)
    create_topic(kafka_bootstrap, f"{topic}.dlq", 1)
    ids = _produce_traced(kafka_bootstrap, topic, jaeger_endpoints["otlp_http"])
    service_name = f"laneway-test-{engine}"
    service = Service(tmp_path, HANDLERS[engine], [SUPPORT])
    flags = ["--engine", engine] + ([] if engine == "sync" else ["--concurrency", "2"])
    service.start(
        *("--bootstrap-servers", kafka_bootstrap, "--group", topic, "--topic", topic),
        *flags,
        *("--max-retries", "1", "--retry-backoff", "0.05", "--config", str(service.kafka_file)),
        env={
            "OTEL_EXPORTER_OTLP_ENDPOINT": jaeger_endpoints["otlp_http"],
            "OTEL_SERVICE_NAME": service_name,
            "OTEL_BSP_SCHEDULE_DELAY": "100",
        },
    )
    traces: dict[str, list[Span]] = {}
    try:
        for value, (trace_id, _) in ids.items():

            def whole(value: str = value, trace_id: str = trace_id) -> bool:
                traces[value] = fetch_trace(jaeger_endpoints["query"], trace_id)
                return len(traces[value]) >= EXPECTED_SPANS[value]

            wait_until(whole, TRACE_WAIT_S, f"the {value} trace in Jaeger: {traces.get(value)}")
        (dead_letter,) = read_records(kafka_bootstrap, f"{topic}.dlq", 1)
    finally:
        service.close()

    for value, spans in traces.items():
        assert len(spans) == EXPECTED_SPANS[value], spans
        (send,) = [s for s in spans if s["parent"] is None]
        assert (send["name"], send["kind"], send["service"]) == (
            f"send {topic}",
            "PRODUCER",
            "jaeger-test-producer",
        )
        assert send["span"] == ids[value][1]
        attempts = _attempts(spans, topic)
        assert len(attempts) == {"ok": 1, "flaky": 2, "poison": 2}[value]
        for attempt in attempts:
            assert attempt["parent"] == send["span"]
            assert (attempt["kind"], attempt["service"]) == ("CONSUMER", service_name)
            assert attempt["attributes"]["messaging.destination.name"] == topic
            assert attempt["attributes"]["messaging.consumer.group.name"] == topic
            _assert_handler_spans_under(spans, attempt, value)

    ok = _attempts(traces["ok"], topic)[0]
    assert not ok["error"] and not ok["events"]

    first, retry = _attempts(traces["flaky"], topic)
    assert first["error"] and not retry["error"] and not retry["events"]
    ((event, attributes),) = first["events"]
    assert event == "exception"
    assert attributes["exception.type"].endswith("FlakyError")

    poison = traces["poison"]
    failed = _attempts(poison, topic)
    for attempt in failed:
        assert attempt["error"]
        assert [e for e, _ in attempt["events"]] == ["exception"]
        assert attempt["events"][0][1]["exception.type"].endswith("PoisonError")
    (dead,) = [s for s in poison if s["name"] == f"send {topic}.dlq"]
    assert (dead["kind"], dead["service"]) == ("PRODUCER", service_name)
    assert dead["parent"] == ids["poison"][1]
    assert dead["start"] >= failed[-1]["end"], "the dead letter follows the last attempt"
    header = dict(dead_letter.headers)["traceparent"].decode()
    assert header.split("-")[1:3] == [ids["poison"][0], dead["span"]]
