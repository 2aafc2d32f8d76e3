"""The result vocabulary of a load over time: the phases of ``--phases`` and the steps of
``--find-max-rate``, with the backlog both are read from (a queue case holds them)."""

from __future__ import annotations

from taskbench.results.model import Figures, Model, Percentiles


class BacklogSecond(Figures):
    """One second of a load, counted from its first request: tasks accepted (the driver's 2xx) and
    executed (the ledger's finish times) in it, and the backlog at its end (accepted minus executed
    so far, never below 0: a task can finish before its 2xx reaches the driver)."""

    t: int
    accepted: int = 0
    executed: int = 0
    backlog: int = 0


class PhaseRecord(Figures):
    """One phase of a load (``--phases``): what was offered, what the API took, what the workers ran.

    Times are seconds since the load's first request. Rates are per second of the phase; ``executed_per_s``
    counts the executions that finished inside it (any task's), ``e2e_ms`` the tasks enqueued inside it.
    """

    signed = frozenset({"backlog_slope"})

    kind: str
    start_s: float
    duration_s: float
    #: the rate the phase offered (requests per second), and ``xM`` when it was a multiple of the steady rate
    offered_rps: float
    multiple: float | None = None
    #: False for a warm-up: shown on the timeline, in no figure
    measured: bool = True
    intended: int = 0
    achieved_rps: float = 0.0
    executed_per_s: float = 0.0
    backlog_end: int = 0
    #: the backlog's least-squares slope over the phase's seconds (tasks per second; > 0: it grew)
    backlog_slope: float = 0.0
    errors: int = 0
    e2e_ms: Percentiles = Percentiles()
    request_ms: Percentiles = Percentiles()
    #: a recovery phase: the backlog it returns to (its level before the disruption, the highest of the last
    #: seconds of the phase before it) and how long after the phase's start it was back there (None: never)
    reference_backlog: int | None = None
    recovered_after_s: float | None = None
    #: a disruption (pause-workers, stall-broker): what was observed that shows it happened
    proof: list[str] = []
    error: str | None = None


class RateStep(Figures):
    """One step of the search for the highest sustainable rate: ``rate`` offered for ``duration_s``.

    The figures are over the step's window (its seconds after ``settle_s``); the backlog's slope is a
    least-squares fit of its per-second values there, with its standard error.
    """

    signed = frozenset({"backlog_slope"})

    rate: float
    duration_s: float
    settle_s: float
    accepted_rps: float = 0.0
    executed_per_s: float = 0.0
    backlog_slope: float = 0.0
    slope_stderr: float = 0.0
    backlog_end: int = 0
    #: tasks enqueued in the window, end to end; a task that had not run when the step was read counts as
    #: beyond every bound
    e2e_p95_ms: float | None = None
    not_run: int = 0
    errors_pct: float = 0.0
    driver_saturated: bool = False
    passed: bool = False
    #: why it missed the objective (empty when it met it)
    reasons: list[str] = []
    #: how long the step's backlog took to drain before the next step (None: it did not, the search stopped)
    drained_after_s: float | None = None
    backlog: list[BacklogSecond] = []


class RateSearch(Model):
    """``--find-max-rate``: a coarse ramp, then a bisection, of the offered rate against the objective.

    ``rate`` is the highest rate that met it below the lowest that missed it (``upper``); the sustainable
    rate lies between them. ``confidence``: ``high`` (bracketed within the precision, the pass clear of its
    bounds by twice the slope's standard error), ``marginal`` (bracketed, the pass inside that noise),
    ``low`` (the steps ran out first), ``lower bound`` (no step missed it: the rate is at least ``rate``),
    ``none`` (no step met it).
    """

    max_e2e_p95_ms: float
    max_growth_pct: float
    step_s: float
    settle_s: float
    precision: float
    rate: float | None = None
    upper: float | None = None
    confidence: str = "none"
    note: str = ""
    steps: list[RateStep] = []
    elapsed_s: float = 0.0
