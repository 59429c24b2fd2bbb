"""The results table and the per-scenario recommendations, derived only from measured rows."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from rich.console import Console
from rich.table import Table

from laneway.bench.engines.ceilings import Limits
from laneway.bench.engines.scenarios import CLIENT_LOOPS, describe_work
from laneway.bench.reporting.rows import Row, is_valid

DISTURBED = 0.2
"""Share of the machine's CPU used by other processes above which a run is flagged."""

FOOTNOTE = (
    "runtime: first fetch -> final commit (raw and ceiling: first -> last message, "
    "raw+results: -> last write acknowledged); ceiling: the client loop that only counts "
    "what it reads (no order check); msg/s = messages / "
    "runtime; vs raw / vs base: msg/s relative to the raw loop / the baseline. startup: "
    "run() call -> first handler start (process pool start, group join, first fetch), NOT "
    "included in runtime. latency: produce timestamp -> handler done; the backlog is produced "
    "before the consumer starts, so it includes the wait in the backlog. handler: mean "
    "handler time. order: handler start order = offset order and no overlap per lane (n/a "
    "when unordered). lost = produced - distinct handled; dup = handled - distinct."
)


def _num(value: float | None, digits: int = 1) -> str:
    return "-" if value is None else f"{value:,.{digits}f}"


def _ratio(value: float | None) -> str:
    if value is None:
        return "-"
    if value >= 1:
        return f"{value:,.1f}"
    return f"{value:.2f}" if value >= 0.01 else f"{value:.0e}"


def results_table(rows: Sequence[Row], title: str) -> Table:
    table = Table(title=title, header_style="bold", show_lines=False)
    for name, justify in (
        ("scenario", "left"), ("variant", "left"), ("engine", "left"), ("msgs", "right"),
        ("runtime s", "right"), ("msg/s", "right"), ("vs raw", "right"), ("vs base", "right"),
        ("latency ms avg / p50 / p95 / p99", "right"), ("handler ms", "right"),
        ("order", "center"), ("lost", "right"), ("dup", "right"), ("startup s", "right"),
    ):  # fmt: skip
        table.add_column(name, justify=justify)  # type: ignore[arg-type]
    for row in rows:
        lat = row["latency_ms"]
        latency = (
            "-" if lat is None else " / ".join(_num(lat[k]) for k in ("avg", "p50", "p95", "p99"))
        )
        rate = f"{row['tps']:,.0f}"
        if row["status"] != "OK":
            rate = f"[red]{row['status']}[/red] {rate}"
        order = row["ordering_check"]
        order_cell = f"[red]{order}[/red]" if order == "FAIL" else order
        table.add_row(
            row["scenario"],
            row["variant"],
            row["engine"],
            f"{row['messages']:,}",
            _num(row["runtime_s"], 2),
            rate,
            _ratio(row["ratio_to_raw"]),
            _ratio(row["ratio_to_baseline"]),
            latency,
            _num(row["handler_ms_avg"], 3),
            order_cell,
            _mark(row["lost"]),
            _mark(row["duplicates"]),
            _num(row["startup_s"], 2),
        )
    return table


def _mark(count: int) -> str:
    return f"[red]{count:,}[/red]" if count else "0"


SHORTEST_RUN_S = 1.0
"""Runs shorter than this (seconds) are dominated by start-up, first fetch and the final
commit, not by the engine: no recommendation is made from them."""


def recommendations(rows: Sequence[Row]) -> list[dict[str, Any]]:
    """Per scenario: the engine with the best throughput and its multiple over baseline.

    Only valid rows (finished, nothing lost or doubled, order kept) count, ``raw`` never
    does (it does no work); a scenario with a run shorter than ``SHORTEST_RUN_S`` gets no
    recommendation. Over several variants an engine's score is the geometric mean
    of its per-variant multiple over baseline (of its throughput when there is no baseline),
    over the variants where it has a valid row; the per-variant winners are listed too.
    """
    result: list[dict[str, Any]] = []
    for scenario in dict.fromkeys(r["scenario"] for r in rows):
        mine = [
            r
            for r in rows
            if r["scenario"] == scenario
            and r["engine"] not in CLIENT_LOOPS
            and "+" not in r["engine"]
        ]
        if not mine:
            continue
        first = mine[0]
        variants = list(dict.fromkeys(r["variant"] for r in mine))
        work = list(dict.fromkeys(r["work_ms"] for r in mine))
        headline = describe_work(first["work"], work, first["cpu_iterations"])
        if len(variants) == 1:
            headline += f" ({first['partitions']} partitions, {first['keys']} keys)"
        valid = [r for r in mine if is_valid(r)]
        entry: dict[str, Any] = {"scenario": scenario, "headline": headline, "engine": None,
                                 "ratio_to_baseline": None, "per_variant": []}  # fmt: skip
        if not valid:
            entry["text"] = f"{headline}: no valid measurement"
            result.append(entry)
            continue
        short = [r for r in valid if r["runtime_s"] < SHORTEST_RUN_S]
        if short:
            entry["text"] = (
                f"{headline}: none (withheld: {len(short)} of {len(valid)} runs lasted under "
                f"{SHORTEST_RUN_S:g} s, too short to tell engines apart; use more --messages)"
            )
            result.append(entry)
            continue
        use_ratio = all(r["ratio_to_baseline"] for r in valid)
        scores: dict[str, list[float]] = {}
        for row in valid:
            score = row["ratio_to_baseline"] if use_ratio else row["tps"]
            scores.setdefault(row["engine"], []).append(score)
        best = max(scores, key=lambda e: _geomean(scores[e]))
        best_rows = [r for r in valid if r["engine"] == best]
        ratios = [r["ratio_to_baseline"] for r in best_rows if r["ratio_to_baseline"]]
        ratio = _geomean(ratios) if ratios else None
        entry["engine"], entry["ratio_to_baseline"] = best, ratio
        text = f"{headline}: {best}"
        if best == "baseline":
            others = {e: _geomean(v) for e, v in scores.items() if e != best}
            text += " (laneway's sync engine); no parallel engine beats it here"
            if others and use_ratio:
                runner_up = max(others, key=others.__getitem__)
                text += f" (next: {runner_up}, {others[runner_up]:.2f}x)"
        elif ratio is not None:
            text += f", {ratio:.1f}x baseline"
            if len(variants) > 1:
                text += f" (geometric mean over {len(ratios)} variants)"
        else:
            text += f", {_geomean([r['tps'] for r in best_rows]):,.0f} msg/s (no baseline)"
        entry["text"] = text
        if len(variants) > 1:
            entry["per_variant"] = _per_variant(valid, variants)
        result.append(entry)
    return result


def _per_variant(valid: Sequence[Row], variants: Sequence[str]) -> list[str]:
    winners: list[str] = []
    for variant in variants:
        candidates = [r for r in valid if r["variant"] == variant]
        if not candidates:
            winners.append(f"{variant}: no valid measurement")
            continue
        top = max(candidates, key=lambda r: r["tps"])
        ratio = top["ratio_to_baseline"]
        multiple = f" {ratio:.1f}x" if ratio else ""
        winners.append(f"{variant}: {top['engine']}{multiple} ({top['tps']:,.0f} msg/s)")
    return winners


def _geomean(values: Sequence[float]) -> float:
    positive = [v for v in values if v > 0]
    if not positive:
        return 0.0
    return math.exp(sum(math.log(v) for v in positive) / len(positive))


def ceiling_lines(
    rows: Sequence[Row],
    limits: Limits,
    event_loop: str,
) -> list[str]:
    """One line per variant: each ceiling and the share of it its engine reached."""
    by_key = {(r["scenario"], r["variant"], r["engine"]): r for r in rows}
    lines = []
    for (scenario, variant), found in limits.items():
        parts = []
        for engine, ceiling in found.items():
            if engine in ("thread", "async") and scenario == "cpu":
                continue  # the GIL: the same one-process figure as the baseline's
            how = ceiling.how + (f" on {event_loop}" if engine == "async" else "")
            row = by_key.get((scenario, variant, engine))
            reached = row and row["ratio_to_ceiling"]
            share = f" ({engine} reached {reached:.2f} of it)" if reached else ""
            parts.append(f"{how} {ceiling.tps:,.0f} msg/s{share}")
        one, many = found.get("baseline"), found.get("process")
        if one and many and one.tps > 0:
            parts.append(f"{many.how} = x{many.tps / one.tps:.2f} of 1 process")
        lines.append(f"{scenario} {variant}: " + "; ".join(parts))
    return lines


def print_report(
    console: Console,
    rows: Sequence[Row],
    title: str,
    advice: Sequence[dict[str, Any]],
    limits: Limits,
    event_loop: str,
) -> None:
    console.print(results_table(rows, title))
    console.print(FOOTNOTE, style="dim", soft_wrap=False)
    if limits:
        console.print()
        console.print("[bold]Work alone[/bold] (no laneway, same run; median of repetitions)")
        for line in ceiling_lines(rows, limits, event_loop):
            console.print(f"  {line}", highlight=False)
    laneway_rows = [r for r in rows if r["engine"].partition("+")[0] not in CLIENT_LOOPS]
    short = [r for r in laneway_rows if r["runtime_s"] < SHORTEST_RUN_S]
    if short:
        console.print(
            f"[yellow]warning:[/yellow] {len(short)} of {len(rows)} runs lasted under "
            f"{SHORTEST_RUN_S:g} s; start-up and the final commit dominate such runs, so "
            "their figures do not compare engines (run more --messages).",
            soft_wrap=False,
        )
    disturbed = [r for r in rows if r["other_cpu"] > DISTURBED]
    if disturbed:
        worst = max(disturbed, key=lambda r: r["other_cpu"])
        console.print(
            f"[yellow]note:[/yellow] other processes used more than {DISTURBED:.0%} of the CPU "
            f"during {len(disturbed)} of {len(rows)} runs (worst: {worst['other_cpu']:.0%} in "
            f"{worst['scenario']} {worst['variant']} {worst['engine']}); those figures are "
            "lower and noisier than on an idle machine (a local Kafka broker counts as other).",
            soft_wrap=False,
        )
    console.print()
    console.print("[bold]Recommendation[/bold] (best measured engine per scenario)")
    for entry in advice:
        console.print(f"  {entry['scenario']}: {entry['text']}")
        for line in entry["per_variant"]:
            console.print(f"      {line}", style="dim")
