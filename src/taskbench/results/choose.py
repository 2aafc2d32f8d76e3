"""The result vocabulary of ``taskbench choose``: the user's constraints, and per candidate backend what
it promises, how far it went through the stages (promise, screen, scale, finalist) with the figures that
decided it, each copied from a result file of a run ``choose`` made (``source``).

The recommendation is not stored as prose to trust: :mod:`taskbench.report.choose` makes it from these
figures and the constraints whenever the page is rendered, so ``choose --from DIR`` with another
``--rate`` or ``--promise`` gives another answer from the same figures.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, Literal

from taskbench.results.model import Model

if TYPE_CHECKING:
    from taskbench.results import QueueCase

#: the stages in order; a candidate's ``stage`` is the last one it took part in
STAGES = ("promise", "screen", "scale", "finalist")
Stage = Literal["promise", "screen", "scale", "finalist"]
Promise = Literal["at-least-once", "any"]


class Cell(Model):
    """One figure: ``value`` with its spread ``low``..``high`` (what the spread is: ``spread``)."""

    value: float | None = None
    low: float | None = None
    high: float | None = None
    unit: str = ""
    #: what low..high is ("the search's bracket", "25th..75th percentile of the soak's windows")
    spread: str = ""
    #: why there is no figure, or what qualifies it
    note: str = ""
    #: the result file the figure comes from
    source: str = ""


class FaultCell(Model):
    """A fault case: what was lost and duplicated, and whether that kept the backend's own promise."""

    fault: str
    injected: bool = False
    #: None: not judged (not injected, or the case did not run)
    kept: bool | None = None
    lost: int | None = None
    duplicated: int | None = None
    #: seconds until the executions came back to half the earlier rate (None: never, or not measured)
    recovered_s: float | None = None
    broken: list[str] = []
    within: list[str] = []
    note: str = ""
    source: str = ""


class Drain(Model):
    """``workers`` workers draining the user's task from a filled queue, no HTTP (``taskbench drain``'s
    measurement with the user's workload)."""

    workers: int
    #: tasks a second between the 10 % and the 90 % marks (else over the whole drain)
    rate: float | None = None
    tasks: int = 0
    executed: int = 0
    failed: int = 0
    #: CPU µs a task: the workers' processes, and the broker's when the harness started it
    worker_cpu_us: float | None = None
    broker_cpu_us: float | None = None
    #: the workers' resident memory once 90 % of the tasks ran, MB (all workers together)
    rss_mb: float | None = None
    note: str = ""
    source: str = ""

    @property
    def cpu_us(self) -> float | None:
        """CPU µs a task, workers and broker together (the broker's left out where it was not measured)."""
        if self.worker_cpu_us is None:
            return None
        return self.worker_cpu_us + (self.broker_cpu_us or 0.0)


class Candidate(Model):
    backend: str
    broker: str = "redis"
    version: str = ""
    #: the stated promise under a dead worker (the registry's, with the run's settings): guarantee and how
    guarantee: str = ""
    promise: str = ""
    has_worker: bool = True
    #: the last stage it took part in, and why it went no further ("" when it passed them all)
    stage: Stage = "promise"
    left: str = ""
    #: the screen's one worker first, then the scale's
    drains: list[Drain] = []
    #: the finalists' figures through the HTTP API, with ``workers`` workers
    workers: int | None = None
    sustainable: Cell = Cell(unit="req/s")
    p95: Cell = Cell(unit="ms")
    #: the rate ``p95`` was measured at
    p95_rate: float | None = None
    faults: list[FaultCell] = []
    memory: Cell = Cell(unit="MB/h")

    def drain(self, workers: int) -> Drain | None:
        return next((d for d in self.drains if d.workers == workers and d.rate), None)

    @property
    def ceiling(self) -> float | None:
        """One worker's drain rate (the screen's)."""
        one = self.drain(1)
        return one.rate if one is not None else None

    def kept_every_promise(self) -> bool | None:
        """True when every fault case was judged and kept; False when one broke; None: none judged."""
        judged = [f.kept for f in self.faults if f.kept is not None]
        return all(judged) if judged else None


class Constraints(Model):
    """What the user asked: the task, the rate to sustain, the e2e objective, the guarantee, the workers."""

    workload: str = "io/simple"
    payload: str | None = None
    #: None: the highest rate is searched
    rate: float | None = None
    p95_ms: float = 1000.0
    promise: Promise = "at-least-once"
    max_workers: int = 1
    broker: str | None = None


class ChooseResult(Model):
    kind: Literal["choose"] = "choose"
    run_id: str
    started: str = ""
    finished: str = ""
    quick: bool = False
    command: str = ""
    machine: dict[str, object] = {}
    commit: dict[str, object] = {}
    #: the budgets the stages ran under (drain tasks and seconds, search steps, fault load, soak)
    budget: dict[str, float] = {}
    constraints: Constraints = Constraints()
    candidates: list[Candidate] = []
    #: seconds each stage took
    stages_s: dict[str, float] = {}
    #: the recommendation's sentences as the run printed them (made again from the figures on render)
    recommendation: list[str] = []
    #: the result files of the runs behind the figures
    results: list[str] = []
    elapsed_s: float = 0.0

    def broken(self) -> list[str]:
        """``backend: line`` for every fault line beyond a backend's own promise."""
        return [f"{c.backend}: {line}" for c in self.candidates for f in c.faults for line in f.broken]


# The decision: made from the figures and the constraints alone, by the run and again by ``--from``.

#: the share of the workers' measured drain rate a recommendation plans on: a queue run near its capacity
#: waits without bound, and a shared machine's speed moves by a fifth from minute to minute
HEADROOM = 0.8


def meets_promise(candidate: Candidate, promise: Promise) -> bool:
    return promise == "any" or candidate.guarantee == "at-least-once"


def workers_for(candidate: Candidate, rate: float, max_workers: int) -> int | None:
    """The fewest workers whose measured drain rate, at the :data:`HEADROOM` planned on, reaches ``rate``
    (0: no worker, the API runs the tasks); None when none measured up to ``max_workers`` does."""
    if not candidate.has_worker:
        return 0
    for drain in sorted(candidate.drains, key=lambda d: d.workers):
        if drain.workers <= max_workers and drain.rate is not None and drain.rate * HEADROOM >= rate:
            return drain.workers
    return None


def best_drain(candidate: Candidate, max_workers: int) -> Drain | None:
    """The measured drain with the most workers up to ``max_workers``."""
    measured = [d for d in candidate.drains if d.rate and d.workers <= max_workers]
    return max(measured, key=lambda d: d.workers) if measured else None


def workers_needed(candidate: Candidate, rate: float) -> int | None:
    """About how many workers ``rate`` needs by the candidate's scaling curve: the rate per worker of its
    largest measured drain, extrapolated, at the :data:`HEADROOM` planned on (None without a drain)."""

    measured = [d for d in candidate.drains if d.rate]
    if not measured:
        return None
    top = max(measured, key=lambda d: d.workers)
    return math.ceil(rate / (HEADROOM * top.rate / top.workers)) if top.rate else None


class Outcome(Model):
    """One candidate judged against the constraints: whether it meets them, with how many workers, the
    stage where it fell short and the figure that decided it."""

    backend: str
    meets: bool = False
    workers: int | None = None
    stage: Stage = "promise"
    reason: str = ""


def workers_text(n: int | None) -> str:
    if n == 0:
        return "no worker (the tasks run in the API process)"
    return "one worker" if n == 1 else f"{n} workers"


def rate_text(value: float | None) -> str:
    if value is None:
        return "–"
    return f"{value:,.0f}/s" if value >= 100 else f"{value:.3g}/s"


def judge_candidate(c: Candidate, k: Constraints) -> Outcome:
    """Where ``c`` falls short of ``k`` (the first stage that decides it), or that it meets them all."""
    out = Outcome(backend=c.backend)
    if not meets_promise(c, k.promise):
        out.reason = f"its promise is {c.guarantee}, weaker than {k.promise} (the page says what it loses)"
        return out
    if c.has_worker:
        out.stage = "screen"
        one = c.drain(1)
        if one is None:
            first = next(iter(c.drains), None)
            out.reason = (first.note if first is not None and first.note else
                          "not measured: it left at the promise stage of this run" if c.stage == "promise"
                          else "the drain gave no rate")
            return out
        if one.failed and one.failed >= one.executed:
            out.reason = f"every one of its {one.executed} calls of the task failed in the drain"
            return out
        if k.rate is not None:
            out.stage = "scale"
            needed = workers_for(c, k.rate, k.max_workers)
            if needed is None:
                top = best_drain(c, k.max_workers)
                assert top is not None
                about = workers_needed(c, k.rate)
                scaled = len([d for d in c.drains if d.rate]) > 1
                out.stage = "scale" if scaled else "screen"
                planned = (top.rate or 0.0) * HEADROOM
                out.reason = (f"{workers_text(top.workers)} drain{'s' if top.workers == 1 else ''} "
                              f"{rate_text(top.rate)}; {HEADROOM:.0%} of it, {rate_text(planned)}, is below "
                              f"{rate_text(k.rate)}")
                if about:
                    by = "its scaling curve" if scaled else "its one worker's rate"
                    out.reason += f"; about {about} workers would, by {by}"
                return out
            out.workers = needed
        else:
            top = best_drain(c, k.max_workers)
            out.workers = top.workers if top is not None else 1
    else:
        out.workers = 0
    if c.stage != "finalist" and c.has_worker:
        out.stage = c.stage
        drained = c.drain(out.workers or 1)
        rate = rate_text(drained.rate if drained else None)
        measured = (f"{workers_text(out.workers)} would do ({rate} drained)" if k.rate is not None
                    else f"{workers_text(drained.workers if drained else 1)} drained {rate}")
        out.reason = f"{measured}; {c.left or 'others went on to the next stage'}"
        return out
    out.stage = "finalist"
    if c.workers is not None and out.workers is not None and c.workers < out.workers:
        out.reason = f"measured through the API with {c.workers} worker(s) only; {out.workers} are needed"
        return out
    if c.sustainable.value is None:
        out.reason = f"no sustainable rate through the API: {c.sustainable.note or 'not measured'}"
        return out
    if k.rate is not None and c.sustainable.value < k.rate:
        out.reason = (f"through the API it sustains {rate_text(c.sustainable.value)}, below {rate_text(k.rate)}"
                      " (the API or the broker limits it, not the workers)")
        return out
    if c.p95.value is not None and c.p95.value > k.p95_ms:
        out.reason = f"e2e p95 {c.p95.value:,.0f} ms at {rate_text(c.p95_rate)}, above the {k.p95_ms:,.0f} ms objective"
        return out
    broken = [f for f in c.faults if f.kept is False]
    if broken:
        out.reason = "broke its own promise under " + " and ".join(f.fault.split("@")[0] for f in broken)
        return out
    out.meets = True
    return out


def order_key(c: Candidate, o: Outcome, k: Constraints) -> tuple[float, ...]:
    """Best first. At a rate: the fewest workers, then the least CPU a task, then the highest sustainable
    rate. Without one: the highest sustainable rate."""
    sustainable = -(c.sustainable.value or 0.0)
    if k.rate is None:
        return (sustainable,)
    drain = c.drain(o.workers or 1)
    cpu = drain.cpu_us if drain is not None and drain.cpu_us is not None else float("inf")
    return (float(o.workers or 0), cpu if c.has_worker else 0.0, sustainable)


# The figures of a stage, read from the result files of its runs.

#: a soak shorter than this (its fitted seconds) is shown with a caution: its slope may be the warm-up
SHORT_SOAK_S = 600.0


def drain_from_row(row: dict[str, Any], source: str) -> Drain:
    rate = row.get("steady_per_s") or row.get("drain_per_s")
    return Drain(workers=int(row.get("workers", 1)), rate=rate, tasks=int(row.get("tasks", 0)),
                 executed=int(row.get("executed", 0)), failed=int(row.get("failed") or 0),
                 worker_cpu_us=row.get("worker_cpu_us_per_task"), broker_cpu_us=row.get("broker_cpu_us_per_task"),
                 rss_mb=row.get("worker_rss_mb"), source=source)


def rate_cell(case: QueueCase | None, source: str) -> Cell:
    search = case.rate_search if case is not None else None
    if search is None:
        reason = "; ".join(case.failures[:1]) if case is not None else "no case"
        return Cell(unit="req/s", note=f"no search: {reason}", source=source)
    return Cell(value=search.rate, low=search.rate, high=search.upper, unit="req/s",
                spread="the search's bracket: the highest rate that met the objective .. the lowest that missed it",
                note=f"confidence {search.confidence}" + (f": {search.note}" if search.note else ""), source=source)


def p95_cell(case: QueueCase | None, rate: float, source: str) -> tuple[Cell, float | None]:
    """The e2e p95 of the search's step nearest ``rate`` (the first step when the search started there)."""
    search = case.rate_search if case is not None else None
    steps = [s for s in (search.steps if search is not None else []) if s.e2e_p95_ms is not None]
    if not steps:
        return Cell(unit="ms", note="no step of the search was read", source=source), None
    step = min(steps, key=lambda s: abs(math.log(s.rate / rate)))
    note = f"the search's step at {step.rate:.4g}/s, its {step.duration_s - step.settle_s:g} s after the settle"
    return Cell(value=step.e2e_p95_ms, unit="ms", note=note, source=source), step.rate


def soak_memory(case: QueueCase | None, source: str) -> Cell:
    """The task processes' memory growth over the soak, with its interval."""
    if case is None or case.soak is None:
        return Cell(unit="MB/h", note="; ".join(case.failures[:1]) if case is not None else "not run", source=source)
    growth = case.soak.growth.get("tasks_mb")
    if growth is None:
        return Cell(unit="MB/h", note="too few points to fit", source=source)
    fitted = growth.to_s - growth.from_s
    note = (f"{growth.slope_per_h * fitted / 3600:+.1f} MB over {fitted:.0f} s at {case.soak.rate:.4g}/s, "
            f"at {growth.level:.0f} MB")
    if fitted < SHORT_SOAK_S:  # a first minute holds the warm-up: a slope there is no leak rate yet
        note += "; a soak this short cannot tell warm-up from a leak (check with run --soak 30m)"
    return Cell(value=growth.slope_per_h, low=growth.low_per_h, high=growth.high_per_h, unit="MB/h",
                spread="95 % interval of the Theil-Sen slope", note=note, source=source)
