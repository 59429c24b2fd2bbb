"""One frame of ``laneway top``'s live view, drawn with rich (``laneway[ops]``)."""

from __future__ import annotations

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from laneway.ops.tables import Cell
from laneway.ops.top.view import View, headline, members_line, partition_rows
from laneway.printable import printable


def frame(view: View | None, where: str) -> RenderableType:
    """The frame for ``view`` (``None``: the first sample is not compared yet)."""
    if view is None:
        return Text(f"laneway top: {where}: taking the second sample...")
    title = Text(f"group {view.now.group} on {where}", style="bold")
    if view.now.share_group:
        return Group(title, Text(view.now.note))
    header, rows = partition_rows(view)
    table = Table(expand=False, header_style="bold")
    for index, name in enumerate(header):
        table.add_column(name, justify="left" if index == 0 else "right")
    for row in rows:
        backlog = row[4]
        style = "yellow" if isinstance(backlog, int) and backlog > 0 else None
        table.add_row(*(Text(_cell(cell)) for cell in row), style=style)
    asked = (
        0
        if view.members_now is None
        else view.members_now.answered + len(view.members_now.failures)
    )
    footer = Text("Ctrl-C to leave; top only reads", style="dim")
    return Group(title, Text(headline(view)), table, Text(members_line(view, asked)), footer)


def _cell(cell: Cell) -> str:
    """A cell's text, printable (and a ``Text``, so rich reads no markup in it)."""
    if cell is None:
        return "-"
    if isinstance(cell, float):
        return f"{cell:,.1f}"
    return printable(str(cell))
