"""The fault matrix: one row per backend (and broker), one column per fault, a cell per case.

A fault scenario's table has a row per case; the matrix folds the same cases into a grid of backends
by faults, so a reader sees at a glance which library loses or repeats tasks under which
fault, and how long it took to recover. Built from the result alone (a result file of any run that
injected faults or delayed its broker renders one), in three forms: rich table, markdown, HTML.

A cell says what the case's audit and recovery say:

- ``ok 1.4 s``: nothing lost nor repeated; execution back at 90 % of the pre-fault rate 1.4 s after
  the fault (``–``: the rate was never measured again, e.g. the load ended first);
- ``err 4.1 %``: requests that failed (the API or the broker was down); ``dup 5, 4.7 s``: 5 tasks ran
  twice; ``lost 3``: 3 accepted tasks never ran; ``failed`` when the
  case failed (a broken promise, no recovery) and ``errors`` when it only reported figures;
- a delay column (``delay 5 ms``) holds the workers' rate, tasks per second.
"""

from __future__ import annotations

import html
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from taskbench import brokers
from taskbench.results import Result
from taskbench.results.cases import QueueCase

if TYPE_CHECKING:
    from rich.table import Table


@dataclass(frozen=True)
class Cell:
    case: int | None
    status: str
    text: str


@dataclass
class Matrix:
    rows: list[str] = field(default_factory=list)
    columns: list[str] = field(default_factory=list)
    cells: dict[tuple[str, str], Cell] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return bool(self.cells)


LEGEND = ("cell: status, then err (requests that failed, %), lost / dup (tasks lost, tasks run twice) and the "
          "seconds from the fault until "
          "execution was back at 90 % of its pre-fault rate; a delay column holds the workers' tasks/s; "
          "#N is the case number")


def row_of(case: QueueCase) -> str:
    """The backend, its broker when not Redis, and the library settings that change its promise where
    the case ran them off their defaults (a row per promise)."""
    row = case.backend if brokers.is_default(case.broker) else f"{case.backend} on {case.broker}"
    return ", ".join([row, *_changed(case)])


def _changed(case: QueueCase) -> list[str]:
    """``--option LIB.KEY=VALUE`` of each promise setting off the library's default; an older file names a
    setting ``<library>_<key>``."""
    from taskbench import backends

    try:
        meta = backends.info(case.backend)
    except backends.UnknownBackendError:
        return [f"{name}={value}" for name, value in case.promise_settings.items()]
    fields = meta.options.model_fields
    out = []
    for name, value in case.promise_settings.items():
        key = name.removeprefix(f"{meta.extra}_")
        shown = str(value).lower() if isinstance(value, bool) else value
        if key not in fields:
            out.append(f"{name}={shown}")
        elif value != fields[key].default:
            out.append(f"--option {meta.extra}.{key}={shown}")
    return out


def _fsync_of(case: QueueCase) -> str | None:
    """The AOF fsync policy the case's broker server ran with (a Redis's ``fsync`` server option), or None."""
    broker = brokers.BROKERS.get(case.broker)
    param = dict(broker.server_options).get("fsync") if broker else None
    return case.params.get(param) if param else None


def column_of(case: QueueCase) -> str | None:
    """The fault the case stands for; None for a case with neither a fault nor a delayed broker."""
    if case.fault is not None:
        name = case.fault.fault
        fsync = _fsync_of(case)
        if name.startswith("restart-broker") and fsync:
            name += f", fsync {fsync}"
        if case.broker_delay_ms:
            name += f", delay {case.broker_delay_ms:g} ms"
        return name
    if case.broker_delay_ms is not None:
        return f"delay {case.broker_delay_ms:g} ms"
    return None


def cell_of(case: QueueCase) -> Cell:
    s = case.summary
    if case.fault is None:  # a delay case: the workers' rate is its figure
        rate = f"{s.executed_per_s:.0f}/s" if s.executed_per_s is not None else "–"
        text = rate if case.status == "ok" else f"{case.status} {rate}"
        return Cell(case.index, case.status, text)
    parts = []
    if s.errors_pct is not None and s.errors_pct >= 0.05:
        parts.append(f"err {s.errors_pct:.1f} %")
    if s.lost:
        parts.append(f"lost {s.lost}")
    if s.duplicated:
        parts.append(f"dup {s.duplicated}")
    if not case.fault.injected:
        parts.append("not injected")
    elif s.executing_90_s is not None:
        parts.append(f"{s.executing_90_s:.1f} s")
    elif s.fault and case.has_worker:
        parts.append("no recovery")
    return Cell(case.index, case.status, f"{case.status} " + ", ".join(parts) if parts else case.status)


def build(result: Result) -> Matrix:
    """The grid of ``result``'s queue cases that injected a fault or delayed their broker."""
    matrix = Matrix()
    for case in result.cases:
        if not isinstance(case, QueueCase):
            continue
        column = column_of(case)
        if column is None:
            continue
        row = row_of(case)
        if row not in matrix.rows:
            matrix.rows.append(row)
        if column not in matrix.columns:
            matrix.columns.append(column)
        cell = cell_of(case)
        key = (row, column)
        if key in matrix.cells:  # the same cell twice (a scenario may repeat one): the worse one shows
            order = {"ok": 0, "errors": 1, "failed": 2}
            if order.get(cell.status, 2) < order.get(matrix.cells[key].status, 2):
                continue
        matrix.cells[key] = cell
    # the columns in the order of the faults' kinds (a scenario's extra cases come after its matrix),
    # each kind's variants in the order they first appeared
    matrix.columns.sort(key=lambda column: _rank(column))
    return matrix


#: the order of the columns: the worker's faults, the broker's, the API's, then the broker's distance
KIND_ORDER = ("kill-worker", "pause-worker", "stall-broker", "restart-broker", "restart-broker-term", "kill-api",
              "delay")


def _rank(column: str) -> int:
    kind = column.split("@")[0].split(" ")[0]
    return KIND_ORDER.index(kind) if kind in KIND_ORDER else len(KIND_ORDER)


_STYLE = {"ok": "green", "errors": "yellow", "failed": "bold red"}


def rich_table(matrix: Matrix, title: str = "fault matrix") -> Table:
    from rich.markup import escape
    from rich.table import Table

    # ``title`` is markup (the caller escapes what it took from the result); rows, columns and cells are text
    table = Table(title=title, title_justify="left", caption=LEGEND, caption_justify="left")
    table.add_column("backend", justify="left")
    for column in matrix.columns:
        table.add_column(escape(column), justify="left")
    for row in matrix.rows:
        cells = []
        for column in matrix.columns:
            cell = matrix.cells.get((row, column))
            if cell is None:
                cells.append("[dim]·[/]")
                continue
            style = _STYLE.get(cell.status, "bold red")
            cells.append(f"[{style}]{escape(cell.text)}[/] [dim]#{cell.case}[/]")
        table.add_row(escape(row), *cells)
    return table


def markdown(matrix: Matrix) -> str:
    headers = ["backend", *matrix.columns]
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    for row in matrix.rows:
        cells = [row]
        for column in matrix.columns:
            cell = matrix.cells.get((row, column))
            cells.append("·" if cell is None else f"{cell.text} (#{cell.case})")
        lines.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    return "\n".join(lines) + f"\n\n{LEGEND}; · no such case.\n"


def html_table(matrix: Matrix) -> str:
    head = "".join(f"<th>{html.escape(c)}</th>" for c in ["backend", *matrix.columns])
    body = []
    for row in matrix.rows:
        cells = [f"<th scope='row'>{html.escape(row)}</th>"]
        for column in matrix.columns:
            cell = matrix.cells.get((row, column))
            if cell is None:
                cells.append("<td class='none'>·</td>")
            else:
                cells.append(f"<td class='{html.escape(cell.status)}' title='case {cell.case}'>"
                             f"{html.escape(cell.text)}</td>")
        body.append("<tr>" + "".join(cells) + "</tr>")
    return (f"<table class='matrix'><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"
            f"<p class='legend'>{html.escape(LEGEND)}</p>")
