"""The search for the highest sustainable rate (``--find-max-rate``): its objective, how one step is
read and judged, and which rate comes next. Pure: the steps are run by
:mod:`taskbench.harness.commands.rate_search`, which hands each one's figures here.

A rate is *sustainable* when, offered for a step (open model: arrivals on a schedule, whatever the
answers), the backlog does not grow faster than ``max_growth_pct`` % of the rate (its least-squares
slope over the step's seconds after ``settle_s``), the end-to-end p95 of the tasks enqueued then stays
under ``max_e2e_p95_ms``, at most ``max_errors_pct`` % of the requests get no 2xx, and the driver kept
its schedule. The search ramps from ``start_rate`` by ``factor`` until a step misses (or down, while
they miss), then bisects (geometric midpoints) the bracket until the highest rate that met the
objective and the lowest that missed it are within ``precision`` of each other.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass

from taskbench.driver import LoadResult
from taskbench.harness.load import backlog
from taskbench.results.load import RateSearch, RateStep

__all__ = ["Objective", "Search", "judge", "measure"]


@dataclass(frozen=True, kw_only=True)
class Objective:
    """What a sustainable rate must meet, and how the search steps (docs/load.md says why these defaults).

    - ``max_e2e_p95_ms`` 1000: a background task (an e-mail, a webhook) that runs more than a second
      after the request is no longer "right after the response"; at a rate every backend sustains,
      each of them stays well under it on the development machine (arq's 0.5 s poll included).
    - ``max_growth_pct`` 5: the backlog may grow by at most 5 % of the offered rate per second: the
      workers keep up with 95 % of the arrivals. Below that, a 7-point fit cannot tell the slope from
      the backlog's own jitter (the tasks in flight of one second).
    - ``step_s`` 10, ``settle_s`` 3: the first seconds of a step fill the pipeline (connections, the
      workers' prefetch); the 7 seconds after them give the slope with a standard error of about a
      fifth of the backlog's jitter.
    """

    max_e2e_p95_ms: float = 1000.0
    max_growth_pct: float = 5.0
    step_s: float = 10.0
    settle_s: float = 3.0
    start_rate: float = 100.0
    factor: float = 2.0
    precision: float = 0.1
    max_steps: int = 14
    min_rate: float = 5.0
    max_rate: float = 20_000.0
    max_errors_pct: float = 1.0
    #: longest wait for a step's backlog to drain before the next step (the search stops past it)
    drain_timeout: float = 90.0

    def __post_init__(self) -> None:
        checks = [
            (0 < self.max_e2e_p95_ms <= 3_600_000, "--max-e2e-p95 must be in (0, 3600000] ms"),
            (0 < self.max_growth_pct <= 100, "--max-backlog-growth must be in (0, 100] % of the rate"),
            (3 <= self.step_s <= 600, "--step-duration must be in [3, 600] seconds"),
            (1 <= self.settle_s <= self.step_s - 2, "the settle time must leave at least 2 s of the step to fit"),
            (self.min_rate <= self.start_rate <= self.max_rate,
             f"--start-rate must be in [{self.min_rate:g}, {self.max_rate:g}] per second"),
            (1 < self.factor <= 10, "the ramp's factor must be in (1, 10]"),
            (0.01 <= self.precision <= 1, "the precision must be in [0.01, 1]"),
            (2 <= self.max_steps <= 100, "the steps must be in [2, 100]"),
            (0 < self.min_rate < self.max_rate <= 1e6, "the rates must be in (0, 1e6]"),
            (0 <= self.max_errors_pct <= 100, "the errors' bound must be in [0, 100] %"),
            (1 <= self.drain_timeout <= 3600, "the drain timeout must be in [1, 3600] seconds"),
        ]
        for ok, message in checks:
            if not ok:
                raise ValueError(message)

    def growth_bound(self, rate: float) -> float:
        """The steepest backlog slope (tasks per second) a step at ``rate`` may show."""
        return rate * self.max_growth_pct / 100

    def to_dict(self) -> dict[str, float]:
        return asdict(self)


def measure(rate: float, load: LoadResult, times: Mapping[str, tuple[float, float, float]], origin: float,
            objective: Objective, *, drained_after_s: float | None = None) -> RateStep:
    """One step's figures and verdict: ``load`` is the driver's account of it, ``times`` the ledger's rows
    of its task ids, ``origin`` its first request on the wall clock."""
    points = backlog.series(((row["t"], row["ok"]) for row in load.per_second), (t[2] for t in times.values()),
                            origin, math.ceil(objective.step_s))
    window = [p for p in points if objective.settle_s <= p.t < objective.step_s]
    span = max(1, len(window))
    fitted, stderr = backlog.slope([(p.t + 1, p.backlog) for p in window])
    start = origin + objective.settle_s
    late = [1000 * (f - e) for e, _, f in times.values() if e >= start]
    not_run = len(set(load.accepted_ids) - set(times))
    # a task that had not run when the step was read is later than any bound
    e2e = backlog.percentile(late + [math.inf] * not_run, 95) if late or not_run else None
    requests = max(1, load.requests)
    step = RateStep(
        rate=rate, duration_s=objective.step_s, settle_s=objective.settle_s,
        accepted_rps=sum(p.accepted for p in window) / span, executed_per_s=sum(p.executed for p in window) / span,
        backlog_slope=fitted, slope_stderr=stderr, backlog_end=backlog.at(points, objective.step_s),
        e2e_p95_ms=None if e2e is None or math.isinf(e2e) else e2e, not_run=not_run,
        errors_pct=100.0 * (requests - load.ok) / requests, driver_saturated=load.saturated,
        drained_after_s=drained_after_s, backlog=points[: math.ceil(objective.step_s)],
    )
    reasons = judge(step, objective, load.saturation_reason)
    return step.model_copy(update={"passed": not reasons, "reasons": reasons})


def judge(step: RateStep, objective: Objective, saturation: str | None = None) -> list[str]:
    """Why ``step`` missed the objective (empty: it met it)."""
    reasons = []
    bound = objective.growth_bound(step.rate)
    if step.backlog_slope > bound:
        reasons.append(f"the backlog grew {step.backlog_slope:.1f} tasks/s (bound {bound:.1f})")
    shortfall = step.rate - step.accepted_rps
    if shortfall > bound:
        reasons.append(f"the API accepted {step.accepted_rps:.0f} of {step.rate:g} req/s offered")
    if step.not_run:
        reasons.append(f"{step.not_run} tasks had not run {objective.drain_timeout:g} s after the step")
    elif step.e2e_p95_ms is not None and step.e2e_p95_ms > objective.max_e2e_p95_ms:
        reasons.append(f"e2e p95 {step.e2e_p95_ms:.0f} ms (bound {objective.max_e2e_p95_ms:g})")
    if step.errors_pct > objective.max_errors_pct:
        reasons.append(f"{step.errors_pct:.1f} % of the requests got no 2xx (bound {objective.max_errors_pct:g} %)")
    if step.driver_saturated:
        reasons.append(f"the load driver fell behind ({saturation or 'saturated'}): the rate is the driver's limit")
    return reasons


class Search:
    """Which rate to offer next, from the steps so far; and what they add up to (:meth:`outcome`)."""

    def __init__(self, objective: Objective) -> None:
        self.objective = objective
        self.steps: list[RateStep] = []
        self.stopped: str | None = None

    def record(self, step: RateStep) -> None:
        self.steps.append(step)

    def stop(self, why: str) -> None:
        """End the search early (a backlog that did not drain): said in the outcome's note."""
        self.stopped = why

    def bracket(self) -> tuple[float | None, float | None]:
        """(the highest rate that met the objective below every miss, the lowest rate that missed it)."""
        missed = [s.rate for s in self.steps if not s.passed]
        upper = min(missed) if missed else None
        met = [s.rate for s in self.steps if s.passed and (upper is None or s.rate < upper)]
        return (max(met) if met else None), upper

    def next_rate(self) -> float | None:
        """The next rate to offer; None once the bracket is within the precision or the steps ran out."""
        o = self.objective
        if self.stopped or len(self.steps) >= o.max_steps:
            return None
        if not self.steps:
            return o.start_rate
        lower, upper = self.bracket()
        if upper is None:  # every step met it: ramp up, to the top once
            assert lower is not None
            return None if lower >= o.max_rate else min(o.max_rate, lower * o.factor)
        if lower is None:  # every step missed it: ramp down
            rate = upper / o.factor
            return rate if rate >= o.min_rate else None
        if upper <= lower * (1 + o.precision):
            return None
        return math.sqrt(lower * upper)

    def outcome(self, elapsed_s: float = 0.0) -> RateSearch:
        """The rate, its bracket and how far to trust it (:class:`~taskbench.results.load.RateSearch`)."""
        o = self.objective
        lower, upper = self.bracket()
        note, confidence = "", "none"
        if lower is None:
            confidence = "none"
            note = (f"no step met the objective, down to {min((s.rate for s in self.steps), default=o.start_rate):g}"
                    " req/s")
        elif upper is None:
            confidence = "lower bound"
            note = f"every step met the objective, up to {lower:g} req/s: the sustainable rate is at least that"
        else:
            passed = max((s for s in self.steps if s.passed and s.rate == lower), key=lambda s: s.backlog_slope)
            width = 100 * (upper / lower - 1)
            clear = passed.backlog_slope + 2 * passed.slope_stderr <= o.growth_bound(lower)
            if upper > lower * (1 + o.precision):
                confidence = "low"
                note = f"between {lower:g} and {upper:g} req/s ({width:.0f} % apart) when the steps ran out"
            else:
                confidence = "high" if clear else "marginal"
                note = (f"met the objective at {lower:.0f} req/s, missed it at {upper:.0f} ({width:.0f} % above); "
                        f"backlog slope there {passed.backlog_slope:+.1f} ± {passed.slope_stderr:.1f} tasks/s "
                        f"(bound {o.growth_bound(lower):.1f})"
                        + ("" if clear else ": within twice its standard error of the bound"))
            met_above = [s.rate for s in self.steps if s.passed and s.rate >= upper]
            if met_above:
                note += (f"; a step at {min(met_above):g} req/s met it above the miss at {upper:g} "
                         "(the machine's noise): the lower figure is reported")
        if self.stopped:
            note += f"; the search stopped: {self.stopped}"
        if any(s.driver_saturated for s in self.steps):
            note += "; the load driver limited a step (more --driver-processes)"
        return RateSearch(max_e2e_p95_ms=o.max_e2e_p95_ms, max_growth_pct=o.max_growth_pct, step_s=o.step_s,
                          settle_s=o.settle_s, precision=o.precision, rate=lower, upper=upper,
                          confidence=confidence, note=note, steps=list(self.steps), elapsed_s=elapsed_s)


def run_synthetic(search: Search, step: Callable[[float], RateStep]) -> RateSearch:
    """Drive ``search`` with ``step`` (a rate -> its judged figures) to its end: the loop
    :mod:`~taskbench.harness.commands.rate_search` runs against a stack, here against a model."""
    while (rate := search.next_rate()) is not None:
        search.record(step(rate))
    return search.outcome()
