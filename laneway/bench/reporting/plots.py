"""``--plot DIR``: PNG charts of a benchmark's rows (matplotlib, Agg backend, no display).

* ``tps-<scenario>.png``: msg/s per engine, grouped by variant (log scale when the spread
  exceeds 50x), each bar labelled with its value;
* ``scaling-<scenario>.png`` for every scenario run over several partition counts: msg/s
  against partitions, one line per engine;
* ``latency-<scenario>.png``: the latency CDF (produce -> done) per engine, one panel per
  variant; for the spike and paced scenarios, per topology.

Only rows that ran (``status`` OK) are drawn; their failures are in the table, not here.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

from matplotlib.axes import Axes
from matplotlib.figure import Figure

from laneway.bench.engines.scenarios import CLIENT_LOOPS, ENGINES
from laneway.bench.reporting.rows import Row

COLORS = {
    "raw": "#7f7f7f",
    "ceiling": "#c7c7c7",
    "baseline": "#1f77b4",
    "thread": "#ff7f0e",
    "async": "#2ca02c",
    "process": "#d62728",
}
DPI = 110


def write_plots(rows: Sequence[Row], directory: Path) -> list[Path]:
    """Draw every chart for ``rows`` into ``directory``; return the files written."""
    directory.mkdir(parents=True, exist_ok=True)
    drawn = [r for r in rows if r["status"] == "OK" and r["tps"] > 0]
    written: list[Path] = []
    loads = [r for r in drawn if "topology" in r]
    for scenario in dict.fromkeys(r["scenario"] for r in loads):
        mine = [r for r in loads if r["scenario"] == scenario]
        written.append(_latency(scenario, mine, directory, "open loop: produced while consuming"))
    drawn = [r for r in drawn if "topology" not in r]
    for scenario in dict.fromkeys(r["scenario"] for r in drawn):
        mine = [r for r in drawn if r["scenario"] == scenario]
        written.append(_throughput(scenario, mine, directory))
        if len({r["partitions"] for r in mine}) > 1:
            written.append(_scaling(scenario, mine, directory))
        if any(r["latency_cdf"] for r in mine):
            written.append(_latency(scenario, mine, directory))
    return written


def _engines(rows: Sequence[Row]) -> list[str]:
    present = {r["engine"] for r in rows}
    return [e for e in ENGINES if e in present]


def _throughput(scenario: str, rows: Sequence[Row], directory: Path) -> Path:
    variants = list(dict.fromkeys(r["variant"] for r in rows))
    engines = _engines(rows)
    width = 0.8 / max(len(engines), 1)
    fig = Figure(figsize=(max(7.0, 1.6 * len(variants) + 3), 4.8), dpi=DPI)
    ax = fig.add_subplot()
    values = [r["tps"] for r in rows]
    for i, engine in enumerate(engines):
        xs, ys = [], []
        for j, variant in enumerate(variants):
            match = [r for r in rows if r["engine"] == engine and r["variant"] == variant]
            if match:
                xs.append(j + (i - (len(engines) - 1) / 2) * width)
                ys.append(match[0]["tps"])
        bars = ax.bar(xs, ys, width, label=engine, color=COLORS[engine])
        ax.bar_label(bars, labels=[_short(y) for y in ys], fontsize=7, padding=2)
    if max(values) / min(values) > 50:
        ax.set_yscale("log")
    ax.set_xticks(range(len(variants)), variants)
    ax.set_ylabel("messages / second")
    ax.set_title(f"{scenario}: throughput by engine (higher is better)")
    ax.legend(fontsize=8, ncols=len(engines), loc="upper center", bbox_to_anchor=(0.5, -0.1))
    ax.grid(axis="y", alpha=0.3)
    return save(fig, directory / f"tps-{scenario}.png")


def _scaling(scenario: str, rows: Sequence[Row], directory: Path) -> Path:
    """Throughput against partitions; the client loops (no work, orders of magnitude above)
    are left out."""
    fig = Figure(figsize=(7.5, 4.8), dpi=DPI)
    ax = fig.add_subplot()
    worked = [r for r in rows if r["engine"] not in CLIENT_LOOPS]
    styles = ("-", "--", ":", "-.")
    combos = list(dict.fromkeys((r["keys"], r["ordering"]) for r in worked))
    for index, (keys, ordering) in enumerate(combos):
        subset = [r for r in worked if r["keys"] == keys and r["ordering"] == ordering]
        for engine in _engines(subset):
            points = sorted((r["partitions"], r["tps"]) for r in subset if r["engine"] == engine)
            xs, ys = zip(*points, strict=True)
            label = engine if len(combos) == 1 else f"{engine} (k{keys} {ordering})"
            style = styles[index % len(styles)]
            ax.plot(xs, ys, style, marker="o", label=label, color=COLORS[engine])
    partitions = sorted({r["partitions"] for r in rows})
    scaling_axes(ax, partitions, "partitions", "messages / second")
    ax.set_title(f"{scenario}: throughput vs partitions")
    return save(fig, directory / f"scaling-{scenario}.png")


def scaling_axes(ax: Axes, counts: Sequence[int], x_label: str, y_label: str) -> None:
    """The axes of a scaling chart: ``counts`` (partitions, members) labelled along a
    base-2 x axis, y from 0, a legend and a grid."""
    ax.set_xscale("log", base=2)
    ax.set_xticks(counts, [str(c) for c in counts])
    ax.set_ylim(bottom=0)
    ax.set_xlabel(x_label)
    ax.set_ylabel(y_label)
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3, which="both")


def _latency(
    scenario: str,
    rows: Sequence[Row],
    directory: Path,
    how: str = "backlog produced before the run",
) -> Path:
    variants = list(dict.fromkeys(r["variant"] for r in rows))
    cols = min(len(variants), 3)
    lines = math.ceil(len(variants) / cols)
    fig = Figure(figsize=(5.0 * cols, 3.6 * lines + 0.6), dpi=DPI, layout="constrained")
    axes = fig.subplots(lines, cols, squeeze=False)
    for index, variant in enumerate(variants):
        ax: Axes = axes[index // cols][index % cols]
        for row in rows:
            if row["variant"] != variant or not row["latency_cdf"]:
                continue
            ms = [max(point[1], 1e-3) for point in row["latency_cdf"]]
            fraction = [point[0] / 100.0 for point in row["latency_cdf"]]
            ax.plot(ms, fraction, label=row["engine"], color=COLORS.get(row["engine"]))
        ax.set_xscale("log")
        ax.set_title(variant, fontsize=9)
        ax.set_xlabel("latency, produce -> done (ms)", fontsize=8)
        ax.set_ylabel("fraction of messages", fontsize=8)
        ax.grid(alpha=0.3, which="both")
        ax.legend(fontsize=7)
    for index in range(len(variants), lines * cols):
        axes[index // cols][index % cols].set_visible(False)
    fig.suptitle(f"{scenario}: latency CDF ({how})")
    return save(fig, directory / f"latency-{scenario}.png")


def _short(value: float) -> str:
    if value >= 1e6:
        return f"{value / 1e6:.1f}M"
    if value >= 1e4:
        return f"{value / 1e3:.0f}k"
    if value >= 1e3:
        return f"{value / 1e3:.1f}k"
    return f"{value:.0f}"


def save(fig: Figure, path: Path) -> Path:
    """Lay ``fig`` out (unless it has a layout engine) and write it to ``path``."""
    if fig.get_layout_engine() is None:
        fig.tight_layout()
    fig.savefig(path)
    return path
