"""OpenTelemetry SDK set-up for tests: spans of the test process (in memory) and of
process-engine workers (one JSON line per span in the file ``TRACE_FILE`` names)."""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult

TRACE_FILE = "LANEWAY_TEST_TRACE_FILE"


def span_record(span: ReadableSpan) -> dict[str, Any]:
    """A span as plain values a test compares."""
    context = span.get_span_context()
    parent = span.parent
    return {
        "name": span.name,
        "kind": span.kind.name,
        "trace_id": format(context.trace_id, "032x") if context else None,
        "span_id": format(context.span_id, "016x") if context else None,
        "parent_id": format(parent.span_id, "016x") if parent else None,
        "attributes": dict(span.attributes or {}),
        "status": span.status.status_code.name,
        "events": [event.name for event in span.events],
        "pid": os.getpid(),
    }


class FileSpanExporter(SpanExporter):
    """Appends each finished span to a file as one JSON line."""

    def __init__(self, path: str) -> None:
        self.path = path

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        with open(self.path, "a") as out:
            for span in spans:
                out.write(json.dumps(span_record(span)) + "\n")
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        pass


def read_spans(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines()]


def configure_from_environment() -> None:
    """In a process-engine worker: export spans to the file of ``TRACE_FILE`` if set."""
    path = os.environ.get(TRACE_FILE)
    if path and not isinstance(trace.get_tracer_provider(), TracerProvider):
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(FileSpanExporter(path)))
        trace.set_tracer_provider(provider)
