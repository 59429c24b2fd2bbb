"""Seed 004's figures computed from a run's traces in Jaeger, beside the bench's own.

A request's *trace length* is what a trace view shows as its duration: from the first
span's start (the producer's ``send <topic>``) to the last span's end (laneway's
``process <topic>`` of its last attempt, or its dead letter's ``send``). From those,
per run: the longest trace (seed 004's "longest producer -> consumer trace"), the
percentiles (the same HdrHistogram as the bench's, 3 significant digits), the sell-out
(first ``send`` to last span end), and how the two ways of measuring one request meet:
``start_gap_ms``, its trace's start minus its record's timestamp (the bench's start, whole
milliseconds, so within a millisecond unless the producer paused inside its span), and
``end_gap_ms``, its trace's end minus the database's ``clock_timestamp()`` of its outcome
(the bench's end, taken inside the transaction: the trace ends after the commit, the
reply, and the handler's return, so later by as much as the consumer is busy).
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from laneway.bench.load.jaeger_traces import RunTraces
from laneway.bench.load.report import latency_figures

if TYPE_CHECKING:
    from laneway.bench.tickets.trace_files import Span


def trace_figures(
    traces: RunTraces, timings: Sequence[tuple[str, float, float]]
) -> dict[str, Any] | None:
    """The ``jaeger`` entry of a load row: ``traces`` (requests whose trace came back),
    ``incomplete``, ``sell_out_s``, ``latency_ms`` and ``latency_cdf`` (from trace lengths),
    ``longest`` (``request``, ``trace_id``, ``ms``, ``spans``), ``start_gap_ms`` and
    ``end_gap_ms`` (``median``, ``p99``, ``min``, ``max``, over the requests both
    measured); None when no trace came back."""
    spans_of = {request: spans for request, spans in traces.by_request.items() if spans}
    if not spans_of:
        return None
    bounds = {
        request: (min(s["start"] for s in spans), max(s["end"] for s in spans))
        for request, spans in spans_of.items()
    }
    lengths = [(request, start / 1e9, end / 1e9) for request, (start, end) in bounds.items()]
    latency, cdf = latency_figures(lengths)
    longest = max(bounds, key=lambda r: bounds[r][1] - bounds[r][0])
    first = min(start for start, _ in bounds.values())
    last = max(end for _, end in bounds.values())
    both = [(bounds[r], produced, done) for r, produced, done in timings if r in bounds]
    starts = [(start / 1e9 - produced) * 1e3 for (start, _), produced, _ in both]
    ends = [(end / 1e9 - done) * 1e3 for (_, end), _, done in both]
    return {
        "traces": len(bounds),
        "incomplete": traces.incomplete,
        "sell_out_s": (last - first) / 1e9,
        "latency_ms": latency,
        "latency_cdf": cdf,
        "longest": {
            "request": longest,
            "trace_id": spans_of[longest][0]["trace"],
            "ms": (bounds[longest][1] - bounds[longest][0]) / 1e6,
            "spans": _ordered(spans_of[longest]),
        },
        "start_gap_ms": _spread(starts),
        "end_gap_ms": _spread(ends),
    }


def _spread(values: Sequence[float]) -> dict[str, float] | None:
    if not values:
        return None
    ordered = sorted(values)
    return {
        "median": statistics.median(ordered),
        "p99": ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))],
        "min": ordered[0],
        "max": ordered[-1],
    }


def _ordered(spans: Sequence[Span]) -> list[Span]:
    return sorted(spans, key=lambda s: (s["start"], -s["end"]))
