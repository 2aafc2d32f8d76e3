"""A run's summary row, the same for the terminal's table and the HTML page: each renders the cells its way.

The columns lead with what decides (:mod:`taskbench.report.pace`), then the HTTP side and the audit. A
cell is spans of text with a tone (``bad``, ``warn``, ``good``), so a renderer colours the figure that
matters (a lost count) and not the cell around it, and a number the HTML table sorts by.
"""

from __future__ import annotations

from dataclasses import dataclass

from taskbench.report.pace import mode_words, pace, seconds
from taskbench.results import QueueCase

Span = tuple[str, str]  # (text, tone: "" | "good" | "warn" | "bad")


@dataclass(frozen=True)
class Cell:
    spans: tuple[Span, ...]
    sort: float | None = None  # what the HTML table sorts by; None: by the text

    @property
    def text(self) -> str:
        return "".join(text for text, _ in self.spans)


#: (header, justify) of every run's columns; a header's line break is where the terminal wraps it
COLUMNS: list[tuple[str, str]] = [
    ("backend", "left"), ("enqueued", "left"), ("accepted\n/s", "right"), ("executed\n/s", "right"),
    ("backlog\nat end", "right"), ("drain\ns", "right"), ("e2e\np95", "right"),
    ("HTTP ms\np50/95/99", "right"), ("err\n%", "right"), ("lost/\ndup/\nunexp", "right"),
    ("status", "left"),
]
#: a user's task's columns (--workload module:callable), before the status
OWN_TASK_COLUMNS: list[tuple[str, str]] = [
    ("failed/\nindet", "right"), ("CPU ms\np50/p95", "right"), ("RSS MB\nstart/peak/end", "right")]
STATUS_TONE = {"ok": "good", "errors": "warn"}


def columns(cases: list[QueueCase]) -> list[tuple[str, str]]:
    """The run's columns: a user's task's three before the status where any case ran one."""
    if any(c.summary.failed is not None for c in cases):
        return COLUMNS[:-1] + OWN_TASK_COLUMNS + COLUMNS[-1:]
    return list(COLUMNS)


def _num(value: float | None, fmt: str = "{:.0f}") -> str:
    return "–" if value is None else fmt.format(value)


def _figure(value: float | None, fmt: str = "{:.0f}") -> Cell:
    return Cell(((_num(value, fmt), ""),), value)


def _count(value: int | None, tone: str) -> Span:
    """A count that is coloured when it is not zero (a lost task, a failed call)."""
    return (_num(value, "{}"), tone if value else "")


def row(case: QueueCase, own_task: bool) -> list[Cell]:
    """The case's cells, in :func:`columns`' order."""
    s, p = case.summary, pace(case)
    status: tuple[Span, ...] = ((case.status, STATUS_TONE.get(case.status, "bad")),)
    if s.driver_saturated:  # the driver's CPU: said under the table
        status += ((" SAT", "warn"),)
    cells = [
        Cell(((case.backend + (" [UNSAFE]" if case.unsafe else ""), ""),)), Cell(((mode_words(case), ""),)),
        _figure(p.accepted_per_s, "{:,.0f}"), _figure(p.executed_per_s, "{:,.0f}"),
        _figure(p.backlog_end, "{:,}"), _figure(p.drain_s, "{:.1f}"),
        Cell(((seconds(p.e2e_p95_ms), ""),), p.e2e_p95_ms),
        Cell((("/".join(_num(v) for v in (s.p50_ms, s.p95_ms, s.p99_ms)), ""),), s.p95_ms),
        _figure(s.errors_pct, "{:.2f}"),
        Cell((_count(s.lost, "bad"), ("/", ""), _count(s.duplicated, "bad"), ("/", ""), _count(s.unexpected, "")),
             (s.lost or 0) + (s.duplicated or 0)),
        Cell(status),
    ]
    if own_task:
        cpu = "–" if s.cpu_p50_ms is None else f"{s.cpu_p50_ms:.2f}/{s.cpu_p95_ms or 0:.2f}"
        rss = "–" if s.rss_start_mb is None else "/".join(
            _num(v) for v in (s.rss_start_mb, s.rss_peak_mb, s.rss_end_mb))
        # failed: the call raised; indeterminate: it started and never finished (hung, or cut by a time limit)
        calls = Cell((_count(s.failed, "warn"), ("/", ""), _count(s.indeterminate if s.failed is not None else None,
                                                                 "warn")), (s.failed or 0) + (s.indeterminate or 0))
        cells[-1:-1] = [calls, Cell(((cpu, ""),), s.cpu_p95_ms),
                        Cell(((rss, ""),), s.rss_end_mb)]
    return cells


#: what the columns mean, said under the table
LEGEND = ("accepted/s: 2xx per second of the load; executed/s: first start to last finish; drain: the load's end "
          "to the last finish; e2e: enqueue to finish. Each task also wrote its ledger record "
          "(`taskbench drain --workload noop --ledger both` measures that cost)")


def not_kept(case: QueueCase) -> str | None:
    """Why the case's 202 does not prove its task is kept (None: it does)."""
    if case.durable:
        return None
    why = case.durability or ("no durable queue" if not case.has_worker else  # older files lack it
                              "after-response enqueue: the 2xx is sent before the broker has the task")
    return f"{case.name}: its 202 does not prove the task is kept ({why})"
