"""Tables printed to a log (not a terminal) keep every header and cell whole (issue 34)."""

from __future__ import annotations

import io

from rich.console import Console
from rich.table import Table

from taskbench.report import fit, matrix, scenario
from taskbench.results import FaultRecord, QueueCase, Result, ScenarioInfo, Summary


def _log() -> tuple[Console, io.StringIO]:
    out = io.StringIO()
    return Console(file=out, width=80, force_terminal=False), out


def _case(index: int, backend: str, fault: str, lost: int = 0) -> QueueCase:
    label = f"{backend} on rabbitmq, {fault}, re-run on"
    return QueueCase(index=index, label=label, backend=backend, broker="rabbitmq",
                     fault=FaultRecord(fault=fault, injected=True, executing_90_s=1.5),
                     summary=Summary(rps=300.0, p50_ms=2.0, accepted=1500, lost=lost, fault=fault,
                                     executing_90_s=1.5, errors_pct=0.0), status="ok")


def _result(faults: list[str]) -> Result:
    cases = [_case(i, backend, fault, lost=i % 2) for i, (backend, fault) in
             enumerate((b, f) for b in ("celery", "faststream", "taskiq") for f in faults)]
    return Result(kind="scenario", run_id="faults-x", created="2026-11-25T12:00:00+00:00",
                  scenario=ScenarioInfo(name="faults", description="d", kind="queue", file="faults.toml"), cases=cases)


def test_a_scenario_table_in_a_log_has_no_cut_header_or_label() -> None:
    console, out = _log()
    scenario.render(_result(["kill-worker@2", "restart-broker@2"]), console)
    text = out.getvalue()
    assert "…" not in text
    assert "median" in text and "accepted" in text and "celery on rabbitmq, kill-worker@2, re-run on" in text


def test_a_table_wider_than_a_log_line_prints_a_line_per_row_and_the_matrix_a_line_per_cell() -> None:
    faults = [f"kill-worker@{t}" for t in range(2, 14)]  # twelve columns: far wider than a log line
    result = _result(faults)
    grid = matrix.build(result)
    console, out = _log()
    fit.print_table(console, matrix.rich_table(grid), per_cell=True)
    lines = out.getvalue().splitlines()
    assert "…" not in out.getvalue()
    assert "celery on rabbitmq · kill-worker@3: ok lost 1, 1.5 s #1" in lines
    assert sum(" · kill-worker@" in line for line in lines) == len(grid.cells)

    table = Table(title="wide")
    for name in ("case", *(f"figure\nnumber {n}" for n in range(40))):
        table.add_column(name)
    table.add_row("first case", *(f"{n}.0" for n in range(40)))
    table.add_row("second case", *("·" for _ in range(40)))
    console, out = _log()
    fit.print_table(console, table)
    first, second = out.getvalue().splitlines()[1:3]
    assert first.startswith("first case: figure number 0 0.0 | figure number 1 1.0") and "number 39 39.0" in first
    assert second == "second case: "  # the empty cells left out


def test_a_terminal_gets_rich_s_own_fit() -> None:
    out = io.StringIO()
    console = Console(file=out, width=60, force_terminal=True, color_system=None)
    table = Table()
    for name in ("case", *(f"column {n}" for n in range(12))):
        table.add_column(name)
    table.add_row("a case", *("1" for _ in range(12)))
    fit.print_table(console, table)
    assert max(len(line) for line in out.getvalue().splitlines()) <= 60  # cut to the window, as rich does
