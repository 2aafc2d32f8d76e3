"""``taskbench compare A.json B.json [...]``: each later run against the first, case by case, metric by metric.

Cases are matched by their parameters (a run's case by backend, broker, workload and enqueue mode; a
scenario's by its label and parameters). A metric is *worse* when it moved the wrong way (RPS down,
latency, errors, lost, duplicated or failed up) by more than the threshold **and** the change is beyond the
noise: Mann–Whitney U on the samples behind it at ``alpha`` (per-second counts for rates; for a latency
percentile, every request's or task's latency from the HDR histograms, as above or below the first
run's percentile, see :mod:`taskbench.report.stats`). Lost and duplicated tasks are counts of
failures, not noisy measurements: any increase is worse. Figures with no samples (the drain time) are
shown with their change but decide nothing. ``gating`` (``--metrics``) narrows which metrics' getting worse
is a regression; the rest are still shown with their verdict.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Literal

from taskbench.histogram import Histogram
from taskbench.report.stats import Test, above, counted, mann_whitney
from taskbench.results import CaseBase, HttpCase, QueueCase, Result
from taskbench.results.model import HistogramData, Load

Verdict = Literal["worse", "better", "same", "noise", "untested"]
Samples = list[tuple[float, int]]


@dataclass
class Metric:
    name: str
    unit: str
    a: float | None
    b: float | None
    higher_is_better: bool
    test: Test | None = None  # None: no samples (shown, never decides)
    verdict: Verdict = "untested"
    #: the metric's name on the command line (``--metrics``), shared with the objectives' figures
    key: str = ""

    @property
    def change(self) -> float | None:
        """Relative change B vs A (0.05 is +5 %); None when A is 0 or a side is missing."""
        if self.a is None or self.b is None or self.a == 0:
            return None
        return (self.b - self.a) / abs(self.a)


@dataclass
class CaseComparison:
    key: str
    name: str
    a: CaseBase
    b: CaseBase
    metrics: list[Metric] = field(default_factory=list)

    @property
    def worse(self) -> list[Metric]:
        return [m for m in self.metrics if m.verdict == "worse"]


@dataclass
class Comparison:
    a: Result
    b: Result
    label_a: str
    label_b: str
    cases: list[CaseComparison]
    only_a: list[str]
    only_b: list[str]
    differing: list[tuple[str, object, object]]  # run parameters that differ
    #: the metrics whose getting worse is a regression (``--metrics``); None: every metric
    gating: frozenset[str] | None = None

    def gates(self, metric: Metric) -> bool:
        return self.gating is None or metric.key in self.gating

    @property
    def regressions(self) -> list[str]:
        return [f"{c.name}: {m.name}" for c in self.cases for m in c.worse if self.gates(m)]


def case_key(case: CaseBase) -> str:
    """What makes two cases the same experiment."""
    if isinstance(case, QueueCase) and case.index is None:
        ident: dict[str, object] = {"backend": case.backend, "broker": case.broker, "workload": case.workload,
                                    "enqueue_mode": case.enqueue_mode}
    else:
        ident = {"kind": case.kind, "label": case.name, "params": case.params}
    return json.dumps(ident, sort_keys=True, default=str)


def differing_params(a: Result, b: Result) -> list[tuple[str, object, object]]:
    from taskbench.report.page import flatten

    fa, fb = dict(flatten(a.config or {})), dict(flatten(b.config or {}))
    skip = {"output", "backends"}
    return [(k, fa.get(k), fb.get(k)) for k in sorted(set(fa) | set(fb))
            if fa.get(k) != fb.get(k) and k.split(".")[0] not in skip]


def compare(a: Result, b: Result, *, threshold: float = 0.05, alpha: float = 0.05,
            label_a: str = "A", label_b: str = "B", gating: frozenset[str] | None = None) -> Comparison:
    # a NaN threshold or alpha makes every comparison false: the gate would pass anything
    if not math.isfinite(threshold) or not 0 <= threshold < 1:
        raise ValueError(f"threshold must be a fraction from 0 to below 1, not {threshold}")
    if not math.isfinite(alpha) or not 0 < alpha < 1:
        raise ValueError(f"alpha must be between 0 and 1, not {alpha}")
    by_key_b = {case_key(c): c for c in b.cases}
    keys_a = [case_key(c) for c in a.cases]
    cases = []
    for key, case_a in zip(keys_a, a.cases, strict=True):
        case_b = by_key_b.get(key)
        if case_b is None:
            continue
        cmp = CaseComparison(key, case_a.name, case_a, case_b, metrics(case_a, case_b))
        for metric in cmp.metrics:
            metric.verdict = decide(metric, threshold, alpha)
        cases.append(cmp)
    return Comparison(a, b, label_a, label_b, cases,
                      only_a=[c.name for k, c in zip(keys_a, a.cases, strict=True) if k not in by_key_b],
                      only_b=[c.name for c in b.cases if case_key(c) not in set(keys_a)],
                      differing=differing_params(a, b), gating=gating)


def decide(metric: Metric, threshold: float, alpha: float) -> Verdict:
    if metric.a is None or metric.b is None or not math.isfinite(metric.a) or not math.isfinite(metric.b):
        return "untested"  # a figure that is no number never passes as "same" (results.load rejects one)
    if metric.name in ("lost", "duplicated", "failed", "indeterminate"):  # failures, not noise
        return "worse" if metric.b > metric.a else "better" if metric.b < metric.a else "same"
    if metric.test is None:
        return "untested"
    if metric.a == metric.b:
        return "same"
    up = metric.b > metric.a
    change = metric.change
    beyond = change is None or abs(change) > threshold
    if not metric.test.decided or metric.test.p >= alpha or not beyond:
        return "noise" if metric.test.decided else "untested"
    return "better" if up == metric.higher_is_better else "worse"


# -- the metrics of one case -------------------------------------------------------------------------


def _per_second(load: Load | None, what: str) -> Samples:
    if load is None:
        return []
    rows = load.per_second
    if len(rows) > 2:  # the last second is a partial one
        rows = rows[:-1]
    return counted(getattr(row, what) for row in rows)


def _hist(data: HistogramData | None) -> Samples:
    """An HDR histogram as weighted samples: each bucket's midpoint in ms (as its percentiles are)."""
    if data is None:
        return []
    return [((low + high) / 2000.0, count) for low, high, count in Histogram.from_dict(data.model_dump()).buckets()]


def _percentile_test(a: Samples, b: Samples, value: float | None) -> Test | None:
    """Do more of B's observations than of A's lie above A's percentile ``value`` (or fewer)?"""
    if value is None or not a or not b:
        return None
    return mann_whitney(above(a, value), above(b, value))


def metrics(a: CaseBase, b: CaseBase) -> list[Metric]:
    sa, sb = a.summary, b.summary
    out: list[Metric] = []
    load_a, load_b = getattr(a, "load", None), getattr(b, "load", None)
    if isinstance(a, QueueCase | HttpCase) and load_a is not None and load_b is not None:
        rate = mann_whitney(_per_second(load_a, "completed"), _per_second(load_b, "completed"))
        out.append(Metric("RPS", "req/s", sa.rps, sb.rps, True, rate, key="rps"))
        lat_a, lat_b = _hist(load_a.latency), _hist(load_b.latency)
        for p in ("p50", "p95", "p99"):
            name = "median latency" if p == "p50" else f"{p} latency"
            out.append(Metric(name, "ms", sa.figure(f"{p}_ms"), sb.figure(f"{p}_ms"), False,
                              _percentile_test(lat_a, lat_b, sa.figure(f"{p}_ms")), key=f"request_{p}"))
        errors = mann_whitney(_per_second(load_a, "errors"), _per_second(load_b, "errors"))
        out.append(Metric("errors", "%", sa.errors_pct, sb.errors_pct, False, errors, key="errors"))
    if isinstance(a, QueueCase) and isinstance(b, QueueCase):
        audit_a, audit_b = a.audit, b.audit
        if audit_a is not None and audit_b is not None:
            e2e_a, e2e_b = _hist(audit_a.end_to_end_histogram), _hist(audit_b.end_to_end_histogram)
            p50_a, p95_a = audit_a.end_to_end_ms.p50, audit_a.end_to_end_ms.p95
            out.append(Metric("e2e p50", "ms", p50_a, audit_b.end_to_end_ms.p50, False,
                              _percentile_test(e2e_a, e2e_b, p50_a), key="e2e_p50"))
            out.append(Metric("e2e p95", "ms", p95_a, audit_b.end_to_end_ms.p95, False,
                              _percentile_test(e2e_a, e2e_b, p95_a), key="e2e_p95"))
            if audit_a.executed_per_second and audit_b.executed_per_second:
                ex = mann_whitney(counted(x for x in audit_a.executed_per_second if x),
                                  counted(x for x in audit_b.executed_per_second if x))
                rate_a = _busy_rate(audit_a.executed_per_second)
                rate_b = _busy_rate(audit_b.executed_per_second)
                out.append(Metric("executed tasks/s", "tasks/s", rate_a, rate_b, True, ex, key="executed_per_s"))
        out.append(Metric("all tasks run in", "s", sa.time_to_run_all_s, sb.time_to_run_all_s, False,
                          key="time_to_run_all"))
    if a.kind == "celery":
        out.append(Metric("tasks/s", "tasks/s", sa.tasks_per_s, sb.tasks_per_s, True, key="tasks_per_s"))
        out.append(Metric("time", "s", sa.elapsed_s, sb.elapsed_s, False, key="elapsed"))
    if sa.lost is not None or sb.lost is not None:
        out.append(Metric("lost", "tasks", sa.lost or 0, sb.lost or 0, False, key="lost"))
        out.append(Metric("duplicated", "tasks", sa.duplicated or 0, sb.duplicated or 0, False, key="duplicated"))
    if sa.failed is not None or sb.failed is not None:  # a user's task: its calls that raised
        out.append(Metric("failed", "tasks", sa.failed or 0, sb.failed or 0, False, key="failed"))
        out.append(Metric("indeterminate", "tasks", sa.indeterminate or 0, sb.indeterminate or 0, False,
                          key="indeterminate"))
    return out


def _busy_rate(per_second: list[int]) -> float | None:
    """Tasks executed per second over the seconds that executed any."""
    busy = [x for x in per_second if x]
    return sum(busy) / len(busy) if busy else None
