"""A load run's traces exported to Jaeger and read back from its HTTP query API, and what
they say: seed 004's figures, the way its author read them off Jaeger.

``laneway bench --scenarios spike --otlp-endpoint URL --jaeger QUERY_URL``: the bench's
producer exports its ``send <topic>`` spans over OTLP/HTTP to URL
(:func:`export_spans_to`), and every ``laneway run`` consumer exports laneway's
``process <topic>`` spans and the handler's ``acquire connection`` and ``SELECT reserve``
spans there too, configured by ``OTEL_EXPORTER_OTLP_ENDPOINT`` as any ``laneway run`` is
(:func:`consumer_environment`). After each run the bench asks Jaeger's query API for the
traces of the run's ``send <topic>`` spans (``GET /api/v3/traces``, :func:`read_run`) and
reports, per request, its trace's length — the producer's span start to the last span's
end — as :class:`TraceFigures`: the longest trace, the percentiles, the sell-out (first
``send`` to last span end), and how far each request's trace is from the bench's own
figure for it (record timestamp to the outcome's ``clock_timestamp()`` in the database).

Resolution: Jaeger keeps the SDK's nanoseconds (the ``/api/v3`` JSON has them), but the
bench's own start is the record's timestamp, whole milliseconds, and its end is taken in
the database before the commit, while the trace ends when the handler's ``process`` span
does, after the commit's reply; so one request's two figures differ by up to ~1 ms of
truncation plus the commit and the reply (``difference_ms`` shows how much, measured).

Exporting: the SDK's batch processor drops spans once its queue is full (2,048 by
default), which a spike of 1,000 requests of three consumer spans each overflows; the
consumers' ``OTEL_BSP_MAX_QUEUE_SIZE`` is raised to :data:`QUEUE_SIZE` and the producer's
processor gets as much, so every span arrives (``incomplete`` counts those that did not).
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # trace_files imports the OpenTelemetry SDK, which only tracing needs
    from laneway.bench.tickets.trace_files import Span

PRODUCER_SERVICE = "ticketing-producer"
CONSUMER_SERVICE = "ticketing-consumer"
QUEUE_SIZE = 65_536
"""Spans an SDK batch processor holds before it drops: room for a spike's."""
READ_TIMEOUT_S = 60.0
"""Seconds to wait for every request's trace to be complete in Jaeger."""
SETTLED_S = 2.0
"""Seconds without a new span after which an incomplete trace counts as incomplete."""
HTTP_TIMEOUT_S = 30.0
_KIND_NAMES = ("INTERNAL", "SERVER", "CLIENT", "PRODUCER", "CONSUMER")
KINDS: dict[object, str] = {
    **{number: name for number, name in enumerate(_KIND_NAMES, start=1)},
    **{f"SPAN_KIND_{name}": name for name in _KIND_NAMES},
}
"""OTLP's span kinds: numbers in Jaeger's JSON, ``SPAN_KIND_*`` in OTLP's own."""
ERROR_CODES = (2, "STATUS_CODE_ERROR")


def export_spans_to(endpoint: str) -> None:
    """Export this process's spans (the producer's) over OTLP/HTTP to ``endpoint`` too."""
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    from laneway.bench.tickets.trace_files import provider_for

    exporter = OTLPSpanExporter(endpoint=f"{endpoint.rstrip('/')}/v1/traces")
    processor = BatchSpanProcessor(exporter, max_queue_size=QUEUE_SIZE, schedule_delay_millis=200)
    provider_for("producer").add_span_processor(processor)


def consumer_environment(endpoint: str) -> dict[str, str]:
    """The variables that make a ``laneway run`` consumer export its spans to ``endpoint``."""
    return {
        "OTEL_EXPORTER_OTLP_ENDPOINT": endpoint,
        "OTEL_SERVICE_NAME": CONSUMER_SERVICE,
        "OTEL_BSP_MAX_QUEUE_SIZE": str(QUEUE_SIZE),
        "OTEL_BSP_SCHEDULE_DELAY": "200",
    }


@dataclass
class RunTraces:
    """The traces of one run's requests, by request id, as Jaeger returned them."""

    by_request: dict[str, list[Span]] = field(default_factory=dict)
    incomplete: int = 0
    """Requests with an outcome whose trace had no successful ``process`` span in time."""


def read_run(query: str, topic: str, prefix: str, done: Sequence[str], since_ns: int) -> RunTraces:
    """The traces of the requests whose ids start with ``prefix`` (produced to ``topic``
    since ``since_ns``), once each request in ``done`` has a successful ``process`` span
    or nothing new arrived for :data:`SETTLED_S` (at most :data:`READ_TIMEOUT_S`)."""
    deadline = time.monotonic() + READ_TIMEOUT_S
    seen, moved = -1, time.monotonic()
    while True:
        found = _find(query, topic, since_ns, len(done))
        traces = RunTraces({k: v for k, v in found.items() if k.startswith(prefix)})
        missing = [r for r in done if not _complete(traces.by_request.get(r, []), topic)]
        spans = sum(len(spans) for spans in traces.by_request.values())
        now = time.monotonic()
        if spans != seen:
            seen, moved = spans, now
        if not missing or now - moved > SETTLED_S or now > deadline:
            traces.incomplete = len(missing)
            return traces
        time.sleep(0.25)


def _complete(spans: Sequence[Span], topic: str) -> bool:
    return any(s["name"] == f"process {topic}" and not s["error"] for s in spans)


def _find(query: str, topic: str, since_ns: int, count: int) -> dict[str, list[Span]]:
    """Every trace with a ``send <topic>`` span of the producer, by its request id."""
    from laneway.bench.tickets.trace_files import REQUEST_ATTRIBUTE

    now = datetime.now(timezone.utc)
    parameters = {
        "query.service_name": PRODUCER_SERVICE,
        "query.operation_name": f"send {topic}",
        "query.start_time_min": _rfc3339(since_ns - 60_000_000_000),
        "query.start_time_max": now.isoformat().replace("+00:00", "Z"),
        "query.num_traces": str(max(count * 2, 100) + 10_000),
    }
    url = f"{query.rstrip('/')}/api/v3/traces?{urllib.parse.urlencode(parameters)}"
    document = _get(url)
    if document is None:
        return {}
    spans = spans_of(document)
    by_trace: dict[str, list[Span]] = {}
    for span in spans:
        by_trace.setdefault(span["trace"], []).append(span)
    by_request: dict[str, list[Span]] = {}
    for trace_spans in by_trace.values():
        ids = [s["attributes"].get(REQUEST_ATTRIBUTE) for s in trace_spans]
        request = next((i for i in ids if isinstance(i, str)), None)
        if request is not None:
            by_request[request] = trace_spans
    return by_request


def fetch_trace(query: str, trace_id: str) -> dict[str, Any] | None:
    """Jaeger's document of one trace (``GET /api/v3/traces/<id>``), None when unknown."""
    return _get(f"{query.rstrip('/')}/api/v3/traces/{trace_id}")


def _get(url: str) -> dict[str, Any] | None:
    try:
        with urllib.request.urlopen(url, timeout=HTTP_TIMEOUT_S) as reply:
            document: dict[str, Any] = json.load(reply)
    except urllib.error.HTTPError as error:
        if error.code == 404:  # "No traces found"
            return None
        raise RuntimeError(f"Jaeger's query API answered {error.code} to {url}") from error
    except (OSError, ValueError) as error:
        raise RuntimeError(f"Jaeger's query API at {url} failed: {error}") from error
    return document


def spans_of(document: Mapping[str, Any]) -> list[Span]:
    """The spans of a ``/api/v3`` document (OTLP JSON) in the shape of
    :data:`~laneway.bench.tickets.trace_files.Span`, plus ``events`` (their names)."""
    spans: list[Span] = []
    for resource_spans in document.get("result", {}).get("resourceSpans", []):
        resource = _attributes(resource_spans.get("resource", {}).get("attributes", []))
        for scope_spans in resource_spans.get("scopeSpans", []):
            for span in scope_spans.get("spans", []):
                parent = span.get("parentSpanId") or None
                spans.append(
                    {
                        "name": span["name"],
                        "trace": span["traceId"].lower(),
                        "span": span["spanId"].lower(),
                        "parent": parent.lower() if parent else None,
                        "start": int(span["startTimeUnixNano"]),
                        "end": int(span["endTimeUnixNano"]),
                        "kind": KINDS.get(span.get("kind"), str(span.get("kind", ""))),
                        "service": str(resource.get("service.name", "")),
                        "attributes": _attributes(span.get("attributes", [])),
                        "error": span.get("status", {}).get("code") in ERROR_CODES,
                        "events": [event["name"] for event in span.get("events", [])],
                    }
                )
    return spans


def _attributes(pairs: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for pair in pairs:
        for kind, value in pair.get("value", {}).items():
            found[pair["key"]] = int(value) if kind == "intValue" else value
    return found


def _rfc3339(ns: int) -> str:
    moment = datetime.fromtimestamp(ns / 1e9, tz=timezone.utc)
    return moment.isoformat().replace("+00:00", "Z")
