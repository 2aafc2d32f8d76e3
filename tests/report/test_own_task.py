"""A user's task's run in every rendering: the failed column with its exception types, CPU and memory."""

from __future__ import annotations

from rich.console import Console

from taskbench.report import html, table
from taskbench.report.compare import compare
from taskbench.results import QueueCase, Result, RssRecord
from tests.report.synthetic import queue_run


def own_task_run(failed: int, run_id: str) -> Result:
    result = queue_run(run_id=run_id)
    case = result.cases[0]
    assert isinstance(case, QueueCase) and case.audit is not None
    types = {"tasks.FlakyError": failed} if failed else {}
    case.audit.failed, case.audit.failed_types = failed, types
    case.audit.categories.attempted = case.audit.accepted
    case.audit.categories.ok = case.audit.accepted - failed
    case.audit.categories.failed = failed
    case.audit.categories.failed_frac = failed / case.audit.accepted
    case.rss = RssRecord(samples_mb=[80.0, 95.0, 120.0], start_mb=80.0, peak_mb=120.0, end_mb=120.0)
    s = case.summary
    s.failed, s.failed_types, s.cpu_p50_ms, s.cpu_p95_ms = failed, types, 0.25, 0.5
    s.rss_start_mb, s.rss_peak_mb, s.rss_end_mb = 80.0, 120.0, 120.0
    return result


def test_the_table_shows_failed_cpu_and_memory_and_the_types_under_it() -> None:
    console = Console(record=True, width=220, force_terminal=False)
    table.render(own_task_run(40, "a"), console)
    text = console.export_text()
    assert "failed" in text and "RSS MB" in text and "0.25/0.50" in text and "80/120/120" in text
    assert "failed 40 (" in text and "tasks.FlakyError 40)" in text


def test_a_built_in_workloads_table_has_no_failed_column() -> None:
    console = Console(record=True, width=220, force_terminal=False)
    table.render(queue_run(), console)
    assert "failed" not in console.export_text()


def test_the_html_report_names_the_exception_types() -> None:
    page = html.render(own_task_run(40, "a"))
    assert "failed by exception type" in page and "tasks.FlakyError 40" in page
    assert "RSS MB start/peak/end" in page and "80/120/120" in page


def test_compare_calls_more_failed_tasks_worse() -> None:
    cmp = compare(own_task_run(0, "a"), own_task_run(40, "b"))
    (failed,) = [m for m in cmp.cases[0].metrics if m.name == "failed"]
    assert (failed.a, failed.b, failed.verdict) == (0, 40, "worse")
