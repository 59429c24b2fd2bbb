"""A trace drawn as a waterfall, the way a trace view shows it (matplotlib, Agg backend):
one bar per span, parents above their children, from when it started after the trace's
first span to when it ended, coloured by service (red when it failed), each labelled with
its duration; the wait between the producer's ``send`` and laneway's first ``process``
span (the request sitting in Kafka and in laneway's buffer) is marked.

``laneway bench --scenarios spike --jaeger URL --plot DIR`` draws each run's longest trace
as ``DIR/trace-<scenario>-<topology>.png``, from the spans Jaeger's query API returned
(also written beside it as the API's JSON document).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.patches import Patch

if TYPE_CHECKING:
    from laneway.bench.tickets.trace_files import Span

SERVICE_COLORS = ("#1f77b4", "#2ca02c", "#9467bd", "#8c564b", "#17becf")
ERROR_COLOR = "#d62728"
WAIT_COLOR = "#bbbbbb"
DPI = 100
INDENT = "\u2003"  # an em space: tick labels keep it, unlike leading ASCII spaces


def draw_waterfall(spans: Sequence[Span], path: Path, title: str) -> Path:
    """Draw ``spans`` (one trace) into ``path`` (PNG); return it."""
    if not spans:
        raise ValueError("a waterfall needs at least one span")
    origin = min(s["start"] for s in spans)
    ordered = list(_tree(spans))
    services = list(dict.fromkeys(s["service"] for _, s in ordered))
    colors = {name: SERVICE_COLORS[i % len(SERVICE_COLORS)] for i, name in enumerate(services)}
    total = (max(s["end"] for s in spans) - origin) / 1e6
    fig = Figure(figsize=(9.0, 0.42 * len(ordered) + 1.5), dpi=DPI, layout="constrained")
    ax = fig.subplots()
    labels = []
    for row, (depth, span) in enumerate(ordered):
        start = (span["start"] - origin) / 1e6
        took = (span["end"] - span["start"]) / 1e6
        color = ERROR_COLOR if span["error"] else colors[span["service"]]
        ax.barh(row, max(took, total / 400), left=start, height=0.6, color=color)
        ax.text(start + max(took, total / 400) + total / 150, row, _ms(took), va="center",
                fontsize=8)  # fmt: skip
        labels.append(INDENT * depth + span["name"])
    _mark_wait(ax, ordered, origin)
    ax.set_yticks(range(len(ordered)), labels, fontsize=8)
    for label in ax.get_yticklabels():  # left-aligned, so a child's indent shows
        label.set_horizontalalignment("left")
    ax.tick_params(axis="y", pad=5.0 * max(len(label) for label in labels) + 4)
    ax.invert_yaxis()
    ax.set_xlim(0, total * 1.12)
    ax.set_xlabel("ms after the producer's send span started", fontsize=9)
    ax.grid(axis="x", alpha=0.3)
    handles = [Patch(color=colors[name], label=name) for name in services]
    if any(s["error"] for s in spans):
        handles.append(Patch(color=ERROR_COLOR, label="failed"))
    ax.legend(handles=handles, fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.16),
              ncol=len(handles), frameon=False)  # fmt: skip
    ax.set_title(title, fontsize=10)
    fig.savefig(path)
    return path


def _mark_wait(ax: Axes, ordered: Sequence[tuple[int, Span]], origin: int) -> None:
    """A grey band from the first PRODUCER span's end to the first CONSUMER span's start."""
    sent = next((s for _, s in ordered if s["kind"] == "PRODUCER"), None)
    taken = next((s for _, s in ordered if s["kind"] == "CONSUMER"), None)
    if sent is None or taken is None or taken["start"] <= sent["end"]:
        return
    begin, end = (sent["end"] - origin) / 1e6, (taken["start"] - origin) / 1e6
    ax.axvspan(begin, end, color=WAIT_COLOR, alpha=0.25, zorder=0)
    ax.text(
        (begin + end) / 2, 0, f"waiting to be handled: {_ms(end - begin)}", ha="center",
        va="center", fontsize=8, color="#555555",
    )  # fmt: skip


def _tree(spans: Sequence[Span]) -> Iterator[tuple[int, Span]]:
    """``(depth, span)``, each parent before its children, siblings by start."""
    known = {s["span"] for s in spans}
    children: dict[str | None, list[Span]] = {}
    for span in spans:
        parent = span["parent"] if span["parent"] in known else None
        children.setdefault(parent, []).append(span)

    def walk(parent: str | None, depth: int) -> Iterator[tuple[int, Span]]:
        for span in sorted(children.get(parent, []), key=lambda s: s["start"]):
            yield depth, span
            yield from walk(span["span"], depth + 1)

    yield from walk(None, 0)


def _ms(value: float) -> str:
    return f"{value:,.1f} ms" if value < 10_000 else f"{value / 1e3:,.2f} s"
