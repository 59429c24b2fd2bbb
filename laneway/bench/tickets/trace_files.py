"""Spans written to files, and the trace of one request read back from them.

``laneway bench --traces DIR`` configures the OpenTelemetry SDK (``opentelemetry-sdk``)
in the bench, which produces the requests, and through ``TICKETING_TRACE_DIR`` in every
consumer process (:mod:`laneway.bench.tickets.handlers`), each writing its spans to a
JSON-lines file of its own in ``DIR``. A request's trace then runs from the producer's
``send <topic>`` span through laneway's ``process <topic>`` span to the handler's
``acquire connection`` and ``SELECT reserve`` spans; :func:`request_trace` finds it by
the request id the producer span carries, and :func:`render` draws it as an indented
timeline.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any, TextIO

from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import (
    BatchSpanProcessor,
    SpanExporter,
    SpanExportResult,
)

REQUEST_ATTRIBUTE = "ticketing.request_id"

Span = dict[str, Any]
"""One span as written: ``name``, ``trace``, ``span``, ``parent`` (hex ids; parent None
for a root), ``start`` and ``end`` (ns since the epoch), ``kind``, ``service``,
``attributes``, ``error`` (bool)."""


class JsonLinesExporter(SpanExporter):
    """Appends each finished span to ``path`` as one JSON object per line."""

    def __init__(self, path: Path) -> None:
        self._file: TextIO = path.open("a", encoding="utf-8")

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        lines = [json.dumps(_as_dict(span)) for span in spans]
        self._file.write("\n".join(lines) + "\n")
        self._file.flush()
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        self._file.close()


def provider_for(role: str) -> TracerProvider:
    """This process's global SDK tracer provider: the one already set (``laneway run``
    sets one when ``OTEL_EXPORTER_OTLP_ENDPOINT`` asks it to), else a new one for the
    service ``ticketing-<role>``, set now."""
    current = trace.get_tracer_provider()
    if isinstance(current, TracerProvider):
        return current
    provider = TracerProvider(resource=Resource.create({"service.name": f"ticketing-{role}"}))
    trace.set_tracer_provider(provider)
    return provider


def write_spans_to(directory: str | Path, role: str) -> None:
    """Make this process's global tracer provider (:func:`provider_for`) write every span
    to ``<directory>/<role>-<pid>.jsonl`` too (flushed at exit)."""
    folder = Path(directory)
    folder.mkdir(parents=True, exist_ok=True)
    exporter = JsonLinesExporter(folder / f"{role}-{os.getpid()}.jsonl")
    processor = BatchSpanProcessor(exporter, max_queue_size=65_536, schedule_delay_millis=200)
    provider_for(role).add_span_processor(processor)


def send_span(topic: str, request_id: str, intended_ns: int) -> AbstractContextManager[Any]:
    """The PRODUCER span of one request's record (current while it is produced), started
    at the request's intended send time: a send behind schedule shows as a longer span."""
    return trace.get_tracer("ticketing").start_as_current_span(
        f"send {topic}",
        kind=trace.SpanKind.PRODUCER,
        start_time=intended_ns,
        attributes={
            "messaging.system": "kafka",
            "messaging.operation.type": "send",
            "messaging.destination.name": topic,
            REQUEST_ATTRIBUTE: request_id,
        },
    )


def flush() -> None:
    """Write out every span ended so far (the bench's own; consumers flush at exit)."""
    provider = trace.get_tracer_provider()
    if isinstance(provider, TracerProvider):
        provider.force_flush()


def read_spans(directory: Path) -> list[Span]:
    spans: list[Span] = []
    for path in sorted(directory.glob("*.jsonl")):
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.strip():
                spans.append(json.loads(line))
    return spans


def request_trace(spans: Sequence[Span], request_id: str) -> list[Span]:
    """Every span of the trace whose producer span carries ``request_id`` (empty when
    none does)."""
    roots = [s for s in spans if s["attributes"].get(REQUEST_ATTRIBUTE) == request_id]
    if not roots:
        return []
    trace_id = roots[0]["trace"]
    return [s for s in spans if s["trace"] == trace_id]


def render(spans: Sequence[Span]) -> list[str]:
    """The trace as lines, parents before children, each with its start after the trace's
    first span started and its duration, e.g. ``process tickets  +312.4 ms  1.9 ms``."""
    if not spans:
        return []
    origin = min(s["start"] for s in spans)
    known = {s["span"] for s in spans}
    children: dict[str | None, list[Span]] = {}
    for span in spans:
        parent = span["parent"] if span["parent"] in known else None
        children.setdefault(parent, []).append(span)
    lines: list[str] = []
    for depth, span in _walk(children, None, 0):
        name = "  " * depth + span["name"]
        start = (span["start"] - origin) / 1e6
        took = (span["end"] - span["start"]) / 1e6
        error = "  ERROR" if span["error"] else ""
        lines.append(f"{name:<34} +{start:8.1f} ms {took:8.1f} ms  [{span['service']}]{error}")
    return lines


def _walk(
    children: dict[str | None, list[Span]], parent: str | None, depth: int
) -> Iterator[tuple[int, Span]]:
    for span in sorted(children.get(parent, []), key=lambda s: s["start"]):
        yield depth, span
        yield from _walk(children, span["span"], depth + 1)


def _as_dict(span: ReadableSpan) -> Span:
    context = span.get_span_context()
    parent = span.parent
    return {
        "name": span.name,
        "trace": f"{context.trace_id:032x}" if context else "",
        "span": f"{context.span_id:016x}" if context else "",
        "parent": f"{parent.span_id:016x}" if parent else None,
        "start": span.start_time,
        "end": span.end_time,
        "kind": span.kind.name,
        "service": span.resource.attributes.get("service.name", ""),
        "attributes": dict(span.attributes or {}),
        "error": span.status.status_code is trace.StatusCode.ERROR,
    }
