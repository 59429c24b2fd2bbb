"""Plain aligned text tables: what ``laneway lag`` and ``laneway top --once`` print, with
nothing beyond the core install."""

from __future__ import annotations

from collections.abc import Sequence

from laneway.offsets.backlog import GroupBacklog
from laneway.printable import printable

Cell = str | int | float | None


def render(header: Sequence[str], rows: Sequence[Sequence[Cell]]) -> str:
    """``header`` and ``rows`` as columns two spaces apart; text left-aligned (its
    non-printable characters escaped: see :func:`~laneway.printable.printable`), numbers
    right-aligned, ``None`` as ``-``; no trailing spaces."""
    shown = [[_text(cell) for cell in row] for row in rows]
    widths = [len(name) for name in header]
    for row in shown:
        for column, cell in enumerate(row):
            widths[column] = max(widths[column], len(cell))
    numeric = [
        all(isinstance(row[c], (int, float)) or row[c] is None for row in rows) and bool(rows)
        for c in range(len(header))
    ]
    lines = []
    for row in [list(header), *shown]:
        cells = [
            cell.rjust(widths[c]) if numeric[c] else cell.ljust(widths[c])
            for c, cell in enumerate(row)
        ]
        lines.append("  ".join(cells).rstrip())
    return "\n".join(lines)


def _text(cell: Cell) -> str:
    if cell is None:
        return "-"
    if isinstance(cell, float):
        return f"{cell:,.1f}"
    if isinstance(cell, int):
        return str(cell)
    return printable(cell)


BACKLOG_HEADER = ("topic", "partition", "committed", "end", "lag", "finished", "backlog")


def backlog_rows(backlog: GroupBacklog) -> list[list[Cell]]:
    """One row per partition, then the totals (``finished``: finished beyond the commit)."""
    rows: list[list[Cell]] = [
        [p.topic, p.partition, p.committed, p.end, p.lag, p.finished_beyond, p.backlog]
        for p in backlog.partitions
    ]
    rows.append(["total", None, None, None, backlog.lag, backlog.finished_beyond, backlog.backlog])
    return rows
