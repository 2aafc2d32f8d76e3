"""A table printed to a log stays readable: every header and cell whole, never cut to "medi…".

On a terminal rich fits a table to the window, which is what a reader there wants. In a log (a pipe, a
file, CI) there is no window: the width rich assumes is arbitrary, and a table wider than it comes out
with headers cut to "acce…" and case labels to "cele…". So a table printed to a log gets the
width it needs, one line per row, up to :data:`LOG_WIDTH` characters; a wider one (the fault matrix's
eleven columns) is printed one line per row (or per cell) as ``header value`` pairs, which wrap as
plain text does and still say which figure is which.
"""

from __future__ import annotations

from rich.console import Console
from rich.table import Table
from rich.text import Text

#: the widest line a table printed to a log may take (a row per line); wider: a line per row or per cell
LOG_WIDTH = 250


def _plain(cell: object, console: Console) -> str:
    """A cell's text without its markup."""
    if isinstance(cell, str):
        return Text.from_markup(cell).plain
    if isinstance(cell, Text):
        return cell.plain
    return "".join(segment.text for segment in console.render(cell)).strip()  # type: ignore[arg-type]


def print_table(console: Console, table: Table, *, per_cell: bool = False, skip: tuple[str, ...] = ("", "·")) -> None:
    """Print ``table``: as rich fits it on a terminal; in a log at its natural width when that is at most
    :data:`LOG_WIDTH`, else a line per row (``per_cell``: a line per cell, ``row · column: cell``), the
    cells in ``skip`` left out."""
    if console.is_terminal:
        console.print(table)
        return
    natural = console.measure(table, options=console.options.update_width(10 * LOG_WIDTH)).maximum
    if natural <= LOG_WIDTH:
        saved = console.width
        console.width = max(saved, natural)
        try:
            console.print(table)
        finally:
            console.width = saved
        return
    if table.title:
        console.print(table.title)
    headers = [_plain(column.header, console).replace("\n", " ") for column in table.columns]
    cells = [list(column.cells) for column in table.columns]
    for row in range(table.row_count):
        values = [_plain(column[row], console) for column in cells]
        first, rest = values[0], list(zip(headers[1:], values[1:], strict=True))
        if per_cell:
            for header, value in rest:
                if value not in skip:
                    console.print(f"{first} · {header}: {value}", markup=False, highlight=False, soft_wrap=True)
        else:
            pairs = " | ".join(f"{header} {value}" for header, value in rest if value not in skip)
            console.print(f"{first}: {pairs}", markup=False, highlight=False, soft_wrap=True)
    if table.caption:
        console.print(table.caption)
