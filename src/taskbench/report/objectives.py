"""Fixed objectives for ``taskbench compare --fail-if "e2e_p95 > 500ms"``: a bound no case may cross.

A relative change needs repeats to be told from the noise (two identical runs on a shared 2-core
machine differ by some 20 %); an objective does not: it is a figure of one run against a number, as a
k6 threshold is. Each objective is ``METRIC OP VALUE``: a figure a case carries, a comparison, and a
number with an optional unit. It *breaches* when the comparison holds for a case (``lost > 0`` breaches
on a case that lost a task).
"""

from __future__ import annotations

import operator
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the results' models load in half a second: not for every command's --help
    from taskbench.results import CaseBase, Result

#: a metric's dimension: the unit its figure is kept in, and the units a VALUE may be written in (to
#: that unit: 0.5s is 500 for a figure in ms); a bare number is in the figure's own unit
UNITS: dict[str, dict[str, float]] = {
    "ms": {"": 1.0, "ms": 1.0, "s": 1000.0},
    "s": {"": 1.0, "s": 1.0, "ms": 0.001},
    "%": {"": 1.0, "%": 1.0},
    "/s": {"": 1.0, "/s": 1.0},
    "tasks": {"": 1.0},
}

OPS: dict[str, Callable[[float, float], bool]] = {
    "<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge, "==": operator.eq, "!=": operator.ne,
}


def _audit(key: str) -> Callable[[CaseBase], float | None]:
    """An end-to-end percentile of a queue case's audit (the summary keeps only the p95)."""
    def get(case: CaseBase) -> float | None:
        from taskbench.results import QueueCase

        if not isinstance(case, QueueCase) or case.audit is None or not case.audit.end_to_end_ms.count:
            return None
        return float(getattr(case.audit.end_to_end_ms, key))
    return get


def _summary(key: str) -> Callable[[CaseBase], float | None]:
    def get(case: CaseBase) -> float | None:
        value = case.summary.figure(key)
        return None if value is None else float(value)
    return get


def _accepted_per_s(case: CaseBase) -> float | None:
    """Tasks the API accepted per second of the load (the 2xx answers, not the errors or the 409s)."""
    from taskbench.results import QueueCase

    kept = getattr(case.summary, "accepted_per_s", None)  # the summary's own figure, where a result has one
    if kept is not None:
        return float(kept)
    accepted = case.summary.accepted
    if not isinstance(case, QueueCase) or accepted is None or case.load is None or case.load.elapsed_s <= 0:
        return None
    return accepted / case.load.elapsed_s


@dataclass(frozen=True)
class Figure:
    unit: str
    help: str
    get: Callable[[CaseBase], float | None]


#: the figures an objective can bound; compare's metrics carry the same names (``--metrics``)
FIGURES: dict[str, Figure] = {
    "rps": Figure("/s", "requests answered per second", _summary("rps")),
    "accepted_per_s": Figure("/s", "tasks accepted per second of the load", _accepted_per_s),
    "executed_per_s": Figure("/s", "tasks executed per second, first start to last finish",
                             _summary("executed_per_s")),
    "request_p50": Figure("ms", "request latency, median", _summary("p50_ms")),
    "request_p95": Figure("ms", "request latency, p95", _summary("p95_ms")),
    "request_p99": Figure("ms", "request latency, p99", _summary("p99_ms")),
    "errors": Figure("%", "requests that failed", _summary("errors_pct")),
    "e2e_p50": Figure("ms", "end-to-end task latency (request to finish), median", _audit("p50")),
    "e2e_p95": Figure("ms", "end-to-end task latency, p95", _audit("p95")),
    "e2e_p99": Figure("ms", "end-to-end task latency, p99", _audit("p99")),
    "time_to_run_all": Figure("s", "from the load's start to the last task's finish", _summary("time_to_run_all_s")),
    "lost": Figure("tasks", "accepted tasks that never ran", _summary("lost")),
    "duplicated": Figure("tasks", "tasks that ran more than once", _summary("duplicated")),
    "failed": Figure("tasks", "your task's calls that raised", _summary("failed")),
    "indeterminate": Figure("tasks", "your task's calls that started and never finished", _summary("indeterminate")),
    "unexpected": Figure("tasks", "tasks that ran though their request failed", _summary("unexpected")),
    "tasks_per_s": Figure("/s", "Celery pool cases: tasks per second", _summary("tasks_per_s")),
}

#: the metrics ``compare`` can call worse (``Metric.key``): a figure with no samples and no count decides nothing
GATED = ("rps", "request_p50", "request_p95", "request_p99", "errors", "e2e_p50", "e2e_p95", "executed_per_s",
         "lost", "duplicated", "failed", "indeterminate")

_OBJECTIVE = re.compile(r"\s*([A-Za-z_][A-Za-z0-9_]*)\s*(<=|>=|==|!=|<|>)\s*"
                        r"([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)\s*(ms|s|%|/s)?\s*")


class ObjectiveError(ValueError):
    """A malformed objective: the message is one line naming it."""


@dataclass(frozen=True)
class Objective:
    text: str  # as given, for messages
    metric: str
    op: str
    value: float  # in the figure's own unit

    @property
    def unit(self) -> str:
        return FIGURES[self.metric].unit

    def breached(self, figure: float) -> bool:
        return OPS[self.op](figure, self.value)


def figure_names() -> str:
    return ", ".join(FIGURES)


def parse(text: str) -> Objective:
    """``"e2e_p95 > 0.5s"`` -> Objective(metric="e2e_p95", op=">", value=500.0)."""
    match = _OBJECTIVE.fullmatch(text)
    if match is None:
        raise ObjectiveError(f"--fail-if {text!r}: write METRIC OP VALUE, like 'e2e_p95 > 500ms' "
                             "(OP one of < <= > >= == !=, VALUE a number with ms, s, % or /s)")
    metric, op, number, unit = match.group(1), match.group(2), float(match.group(3)), match.group(4) or ""
    figure = FIGURES.get(metric)
    if figure is None:
        raise ObjectiveError(f"--fail-if {text!r}: no metric {metric!r}; the metrics: {figure_names()}")
    scale = UNITS[figure.unit].get(unit)
    if scale is None:
        if figure.unit == "tasks":
            raise ObjectiveError(f"--fail-if {text!r}: {metric} counts tasks; write its value with no unit")
        allowed = " or ".join(repr(u) for u in UNITS[figure.unit] if u)
        raise ObjectiveError(f"--fail-if {text!r}: {metric} is in {figure.unit}; write its value with {allowed}")
    return Objective(text.strip(), metric, op, number * scale)


@dataclass
class CaseCheck:
    result: str  # the result's label
    case: str
    value: float | None  # None: the case has no such figure
    breached: bool


@dataclass
class ObjectiveCheck:
    objective: Objective
    cases: list[CaseCheck] = field(default_factory=list)

    @property
    def breaches(self) -> list[CaseCheck]:
        return [c for c in self.cases if c.breached]

    @property
    def measured(self) -> bool:
        return any(c.value is not None for c in self.cases)

    @property
    def passed(self) -> bool:
        # an objective on a figure no case has would pass anything: a gate set up wrong fails
        return self.measured and not self.breaches


def check(objectives: list[Objective], results: list[tuple[str, Result]]) -> list[ObjectiveCheck]:
    """Every objective against every case of every result (each a label and its result)."""
    out = []
    for objective in objectives:
        checked = ObjectiveCheck(objective)
        for label, result in results:
            for case in result.cases:
                value = FIGURES[objective.metric].get(case)
                checked.cases.append(CaseCheck(label, case.name, value,
                                               value is not None and objective.breached(value)))
        out.append(checked)
    return out


def describe(checked: ObjectiveCheck) -> str:
    """One line: which cases breached the objective, and with what figure."""
    objective = checked.objective
    if not checked.measured:
        return f"objective {objective.text}: no case measures {objective.metric}"
    if checked.breaches:
        return f"objective {objective.text} breached: " + "; ".join(
            f"{c.result} {c.case} {objective.metric} = {c.value:.6g} {objective.unit}" for c in checked.breaches)
    measured = sum(1 for c in checked.cases if c.value is not None)
    return f"objective {objective.text} met by every case ({measured})"
