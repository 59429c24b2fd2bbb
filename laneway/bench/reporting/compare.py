"""``laneway bench compare A.json B.json``: throughput of B relative to A, row by row."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from laneway.bench.reporting.rows import read_json

Key = tuple[str, str, str]

MOMENTARY = frozenset({"load_1m"})
"""Machine fields that describe the moment, not the setup (reported apart)."""


def _rows_by_key(doc: dict[str, Any]) -> dict[Key, dict[str, Any]]:
    return {(r["scenario"], r.get("variant", ""), r["engine"]): r for r in doc["rows"]}


def compare_table(a_path: Path, b_path: Path) -> tuple[Table, list[str]]:
    """The ratio table and notes (rows found in one file only, different machines)."""
    a_doc, b_doc = read_json(a_path), read_json(b_path)
    a_rows, b_rows = _rows_by_key(a_doc), _rows_by_key(b_doc)
    table = Table(title=f"msg/s of B = {b_path.name} relative to A = {a_path.name}")
    for name in ("scenario", "variant", "engine", "A msg/s", "B msg/s", "B/A"):
        table.add_column(
            name, justify="left" if name in ("scenario", "variant", "engine") else "right"
        )
    for key in [k for k in a_rows if k in b_rows]:
        a_tps, b_tps = float(a_rows[key]["tps"]), float(b_rows[key]["tps"])
        ratio = f"{b_tps / a_tps:.2f}x" if a_tps > 0 else "-"
        style = "green" if a_tps > 0 and b_tps / a_tps >= 1.05 else None
        if a_tps > 0 and b_tps / a_tps <= 0.95:
            style = "red"
        cell = ratio if style is None else f"[{style}]{ratio}[/{style}]"
        table.add_row(*key, f"{a_tps:,.0f}", f"{b_tps:,.0f}", cell)
    notes = [f"only in A: {' '.join(k)}" for k in a_rows if k not in b_rows]
    notes += [f"only in B: {' '.join(k)}" for k in b_rows if k not in a_rows]
    a_machine, b_machine = a_doc.get("machine") or {}, b_doc.get("machine") or {}
    differing = sorted(
        k for k in a_machine if k not in MOMENTARY and a_machine.get(k) != b_machine.get(k)
    )
    if a_machine and b_machine and differing:
        notes.append(
            f"the files were measured on different setups (differ in: {', '.join(differing)})"
        )
    a_load, b_load = a_machine.get("load_1m"), b_machine.get("load_1m")
    if a_load is not None and b_load is not None and abs(a_load - b_load) >= 0.5:
        notes.append(
            f"the machine was busier during {'B' if b_load > a_load else 'A'} (load average "
            f"A {a_load:.1f}, B {b_load:.1f}): its figures are lower and noisier"
        )
    return table, notes


def print_comparison(console: Console, a_path: Path, b_path: Path) -> None:
    table, notes = compare_table(a_path, b_path)
    console.print(table)
    for note in notes:
        console.print(note, style="dim")
