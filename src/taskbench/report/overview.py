"""What a page compares across its cases: the chart at its top (the cases on shared axes) and the ranges
the per-case plots share, so that two cases' curves read on one scale. From the result only."""

from __future__ import annotations

from dataclasses import dataclass

from taskbench.histogram import Histogram
from taskbench.report import plots
from taskbench.report.page import figure
from taskbench.results import CaseBase, HttpCase, QueueCase, Result


def accepted_per_s(case: QueueCase) -> float | None:
    """Tasks the API accepted per second of the load (its 2xx answers, not the errors or the 409s): the
    summary's; older results: from the accepted count and the load's length."""
    if case.summary.accepted_per_s is not None:
        return case.summary.accepted_per_s
    accepted = case.summary.accepted
    if accepted is None or case.load is None or case.load.elapsed_s <= 0:
        return None
    return accepted / case.load.elapsed_s


def executed_per_s(case: QueueCase) -> float | None:
    """The workers' rate, first start to last finish (the summary's; older results: from the audit)."""
    if case.summary.executed_per_s is not None:
        return case.summary.executed_per_s
    audit = case.audit
    if audit is None or audit.first_start is None or audit.last_finish is None or audit.executed < 2:
        return None
    span = audit.last_finish - audit.first_start
    return audit.executed / span if span > 0 else None


def compared(result: Result) -> list[plots.Rates]:
    """A bar group per queue case that ran a load, in the result's order."""
    return [plots.Rates(case.name, accepted_per_s(case), executed_per_s(case), case.summary.e2e_p95_ms)
            for case in result.cases if isinstance(case, QueueCase) and case.load is not None]


def comparison_html(result: Result) -> str:
    """The chart at the top of the page ("" with fewer than two cases to compare)."""
    items = compared(result)
    if len(items) < 2:
        return ""
    caption = ("accepted/s: tasks the API accepted per second of the load; executed/s: the workers' rate, first "
               "task's start to last one's finish (below accepted/s: a backlog built up and drained after the "
               "load); end-to-end: from the request to the task's finish")
    return "<h2>Cases compared</h2><div class=\"overview\">" + figure(plots.comparison(items), caption) + "</div>"


# -- the ranges the per-case plots share ---------------------------------------------------------------


@dataclass(frozen=True)
class Scales:
    """The top of each quantity's axis over every case of a page (None: each plot its own)."""

    rate: float | None = None  # requests and tasks per second
    latency_ms: float | None = None  # request latency by percentile
    e2e_span_us: tuple[float, float] | None = None  # the end-to-end distribution's value axis
    e2e_count: float | None = None  # and its tallest bucket


def _rate_top(case: CaseBase) -> float:
    """The highest per-second figure a case's timeline draws."""
    load = case.load if isinstance(case, QueueCase | HttpCase) else None
    tops = [max(row.completed, row.ok, row.errors) for row in load.per_second] if load is not None else []
    if isinstance(case, QueueCase):
        if case.fault is not None:
            tops += [max(row.accepted, row.executed) for row in case.fault.timeline]
        if case.audit is not None:
            tops += case.audit.executed_per_second
    return float(max(tops, default=0))


def _e2e(case: CaseBase) -> Histogram | None:
    if isinstance(case, QueueCase) and case.audit is not None and case.audit.end_to_end_histogram.count:
        return Histogram.from_dict(case.audit.end_to_end_histogram.model_dump())
    return None


def scales(result: Result) -> Scales:
    """One range per quantity across the cases (a page of one case: each plot its own)."""
    cases = [c for c in result.cases if isinstance(c, QueueCase | HttpCase) and c.load is not None]
    if len(cases) < 2:
        return Scales()
    rate = max(_rate_top(c) for c in cases)
    latencies = [c.load.latency.max / 1000.0 for c in cases if c.load is not None and c.load.latency.count]
    hists = [h for h in map(_e2e, cases) if h is not None]
    span = plots.span_of(hists) if hists else None
    count = max(max(plots.regroup(h, *span)) for h in hists) if span else None
    return Scales(rate=rate * 1.05 if rate else None, latency_ms=max(latencies) * 1.05 if latencies else None,
                  e2e_span_us=span, e2e_count=count * 1.05 if count else None)
