"""The run's terminal table: it leads with what decides (the API's rate against the workers', the backlog,
the task's wait), names the bottleneck when the workers lag, and says when the tasks were handed over."""

from __future__ import annotations

from rich.console import Console

from taskbench.report.pace import bottleneck_line
from taskbench.report.table import render
from taskbench.results import QueueCase, Result
from tests.report.synthetic import queue_run


def _text(result: Result, width: int = 200) -> str:
    console = Console(record=True, width=width, force_terminal=False)
    render(result, console)
    return console.export_text()


def _lagging(*, executed: float = 198.0, drain: float | None = 40.2, workers: int = 1) -> Result:
    """arq's figures on a fresh clone: the API accepted 896/s, one worker ran 198/s."""
    result = queue_run()
    (case,) = result.cases
    assert isinstance(case, QueueCase)
    case.workers, case.concurrency = workers, 10
    case.summary = case.summary.model_copy(update={
        "accepted_per_s": 896.0, "executed_per_s": executed, "backlog_end": 8412, "drain_s": drain,
        "e2e_p95_ms": 37_000.0})
    return result


def test_the_table_leads_with_the_rates_the_backlog_and_the_e2e_p95() -> None:
    (header,) = [line for line in _text(queue_run()).splitlines() if "┃ accepted" in line]  # the headers' line 2
    at = [header.index(word) for word in ("accepted", "executed", "backlog", "drain", "e2e", "HTTP ms", "err")]
    assert at == sorted(at), header


def test_the_table_fits_120_columns_on_a_terminal() -> None:
    console = Console(record=True, width=120, force_terminal=True, color_system=None)
    render(_lagging(), console)
    lines = console.export_text().splitlines()
    table = [line for line in lines if "┃" in line or "│" in line]
    assert table and all(len(line) <= 120 for line in table)
    assert not any("…" in line for line in table), "no header or cell cut short"


def test_a_line_names_the_bottleneck_when_the_workers_lag() -> None:
    text = " ".join(_text(_lagging()).split())
    assert ("arq: the API accepted 896/s, its 1 worker (concurrency 10) ran 198/s: 8,412 tasks were left at "
            "the load's end and the last ran 40 s after it (e2e p95 37 s)") in text
    # one worker ran 198/s of 896/s: five, if they scale, which the command then measures
    assert "`taskbench run -b arq --workers 5 --find-max-rate`" in text


def test_no_bottleneck_line_when_the_workers_keep_up() -> None:
    for result in (_lagging(executed=850.0, drain=3.0),  # 95 % of the accepted rate
                   _lagging(executed=400.0, drain=0.4),  # the last task within a second of the load's end
                   queue_run()):  # an older file: no accepted/s nor drain in its summary, its rates equal
        (case,) = result.cases
        assert isinstance(case, QueueCase)
        assert bottleneck_line(case) is None
        assert "the API accepted" not in _text(result)


def test_no_bottleneck_line_when_the_figures_to_tell_are_missing() -> None:
    result = _lagging(drain=None)
    (case,) = result.cases
    assert isinstance(case, QueueCase)
    case.summary.executed_per_s = None
    assert bottleneck_line(case) is None


def test_the_mode_says_when_the_task_was_handed_over() -> None:
    result = queue_run()
    (arq,) = result.cases
    assert isinstance(arq, QueueCase)
    late = arq.model_copy(update={"backend": "saq", "enqueue_mode": "after-response", "durable": False,
                                  "durability": "after-response enqueue: the 2xx comes before the broker "
                                                "holds the task"})
    background = arq.model_copy(update={"backend": "background", "has_worker": False, "durable": False,
                                        "durability": "no queue: tasks live in the API process"})
    result.cases = [background, arq, late]
    rows = {line.split()[0]: line for line in _text(result).splitlines() if "│" in line}
    assert "before 202" in rows["arq"] and "after 202" in rows["saq"] and "no queue" in rows["background"]
    assert "*" not in "".join(rows.values())
    text = _text(result)
    assert "background: its 202 does not prove the task is kept (no queue: tasks live in the API process)" in text
    assert "saq: its 202 does not prove the task is kept (after-response enqueue" in text
    assert "arq: its 202" not in text


def test_the_footer_says_the_ledger_was_on() -> None:
    text = " ".join(_text(queue_run()).split())
    assert "Each task also wrote its ledger record" in text
    assert "taskbench drain --workload noop --ledger both" in text
