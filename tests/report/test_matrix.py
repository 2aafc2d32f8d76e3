"""The fault matrix: cases folded into backend × fault, and shown in the terminal, markdown and HTML."""

from __future__ import annotations

import io

from rich.console import Console

from taskbench.report import html, matrix, scenario
from taskbench.results import FaultRecord, QueueCase, Result, ScenarioInfo, Summary


def _case(index: int, backend: str, fault: str | None, *, broker: str = "redis", status: str = "ok",
          lost: int = 0, dup: int = 0, recovered: float | None = 1.4, delay: float | None = None,
          fsync: str | None = None, rate: float | None = None) -> QueueCase:
    record = None if fault is None else FaultRecord(fault=fault, injected=True, executing_90_s=recovered)
    summary = Summary(lost=lost, duplicated=dup, executing_90_s=recovered if fault else None,
                      fault=fault, executed_per_s=rate)
    params = {"redis_fsync": fsync} if fsync else {}
    return QueueCase(index=index, label=f"{backend} {fault}", backend=backend, broker=broker, fault=record,
                     summary=summary, status=status, broker_delay_ms=delay, params=params)


def _result() -> Result:
    cases = [
        _case(0, "arq", "kill-worker@2.5"),
        _case(1, "saq", "kill-worker@2.5", status="errors", dup=2, recovered=4.5),
        _case(2, "arq", "restart-broker@2.5", fsync="always"),
        _case(3, "arq", "restart-broker@2.5", fsync="none", status="errors", lost=40, recovered=None),
        _case(4, "celery", "restart-broker@2.5", broker="rabbitmq", status="failed", lost=1),
        _case(5, "arq", None, delay=5.0, rate=21.4),
        _case(6, "saq", None, delay=5.0, rate=129.0),
    ]
    return Result(kind="scenario", run_id="faults-x", created="2026-11-25T12:00:00+00:00",
                  command=["taskbench", "run", "--scenario", "faults"],
                  scenario=ScenarioInfo(name="faults", description="d", kind="queue", file="faults.toml"), cases=cases)


def test_cases_fold_into_rows_per_backend_and_columns_per_fault() -> None:
    grid = matrix.build(_result())
    assert grid.rows == ["arq", "saq", "celery on rabbitmq"]
    assert grid.columns == ["kill-worker@2.5", "restart-broker@2.5, fsync always", "restart-broker@2.5, fsync none",
                            "restart-broker@2.5", "delay 5 ms"]
    cells = {key: (cell.text, cell.case) for key, cell in grid.cells.items()}
    assert cells[("arq", "kill-worker@2.5")] == ("ok 1.4 s", 0)
    assert cells[("saq", "kill-worker@2.5")] == ("errors dup 2, 4.5 s", 1)
    assert cells[("arq", "restart-broker@2.5, fsync none")] == ("errors lost 40, no recovery", 3)
    assert cells[("celery on rabbitmq", "restart-broker@2.5")] == ("failed lost 1, 1.4 s", 4)
    assert cells[("arq", "delay 5 ms")] == ("21/s", 5)
    assert ("celery on rabbitmq", "kill-worker@2.5") not in grid.cells


def test_the_matrix_is_in_the_terminal_table_the_markdown_and_the_html() -> None:
    result = _result()
    out = io.StringIO()
    scenario.render(result, Console(file=out, width=250, force_terminal=False))
    text = out.getvalue()
    assert "fault matrix of faults" in text and "errors dup 2, 4.5 s #1" in text
    md = scenario.markdown(result)
    assert "| backend | kill-worker@2.5 | restart-broker@2.5, fsync always |" in md
    assert "| celery on rabbitmq | · | · | · | failed lost 1, 1.4 s (#4) | · |" in md
    page = html.render(result)
    assert "<h2>Fault matrix</h2>" in page
    assert page.index("<h2>Fault matrix</h2>") < page.index("<h2>Summary</h2>")
    assert "<td class='failed' title='case 4'>failed lost 1, 1.4 s</td>" in page


def test_a_run_without_faults_has_no_matrix() -> None:
    result = _result()
    result.cases = [c for c in result.cases if c.index == 0]
    assert len(matrix.build(result).cells) == 1
    assert "Fault matrix" not in html.render(result)
    result.cases[0].fault = None
    assert not matrix.build(result)
