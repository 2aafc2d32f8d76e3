"""The result vocabulary, part 1: the records a case is made of (load, audit, limits, fault, summary).

The harness builds these, the renderers (terminal table, scenario table, markdown) read them, and
nothing passes results around as ``dict[str, Any]``. Every model forbids unknown fields, so a renamed
figure fails where it is written, not when a report renders. The cases and the whole result are in
:mod:`taskbench.results.cases`; files of older schemas are converted by :mod:`taskbench.results.migrate`.
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal, Self

from pydantic import BaseModel, ConfigDict, ValidationInfo, model_validator

Status = Literal["ok", "errors", "failed"]
#: the driver's error kind of a 409: the task id was already submitted in the run (an answer of the
#: API's idempotency contract, not a failure of the backend)
REFUSED = "http_409"
CaseKind = Literal["queue", "http", "celery", "overhead"]


class Model(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True)


#: the validation context key under which :class:`Figures` are checked (``results.parse``: a file read)
FIGURES_CHECKED = "figures_checked"


class Figures(Model):
    """A record of measured figures: counts, rates, latencies and durations, none of them negative.

    Checked when a file is read (:func:`taskbench.results.parse` validates with :data:`FIGURES_CHECKED`),
    so a hand-edited ``"lost": -3`` is an error naming the field instead of a table that shows it or a
    comparison that passes it; the harness's own models are not re-checked as it builds them.
    """

    #: figures that are offsets between two processes' clocks, which a little skew can make negative
    signed: ClassVar[frozenset[str]] = frozenset()

    @model_validator(mode="after")
    def _not_negative(self, info: ValidationInfo) -> Self:
        if info.context and info.context.get(FIGURES_CHECKED):
            for name in type(self).model_fields:
                value = getattr(self, name)
                if isinstance(value, int | float) and not isinstance(value, bool) and value < 0 \
                        and name not in self.signed:
                    raise ValueError(f"{name} must not be negative, got {value}")
        return self


# -- what the load generator saw -----------------------------------------------------------------


class Percentiles(Figures):
    """Milliseconds, from an HDR histogram."""

    p50: float = 0.0
    p90: float = 0.0
    p95: float = 0.0
    p99: float = 0.0
    p99_9: float = 0.0
    max: float = 0.0
    mean: float = 0.0
    count: float = 0.0


class HistogramData(Figures):
    """An HDR histogram in microseconds: ``[bucket key, count]`` pairs (see :mod:`taskbench.histogram`)."""

    buckets: list[tuple[int, int]] = []
    count: int = 0
    total: int = 0
    min: int = 0
    max: int = 0


class Second(Figures):
    """One second of the load: responses (any status), 2xx, failures, users active."""

    t: int
    completed: int = 0
    ok: int = 0
    errors: int = 0
    users: int = 0


class DriverCpu(Figures):
    cpu_s: float
    wall_s: float
    utilization: float


class StageLoad(Figures):
    """One stage of a rate schedule (a phase of ``--phases``): arrivals due, dispatched late, answered,
    2xx, no 2xx, and its requests' latency (each request belongs to the stage of its intended send)."""

    intended: int = 0
    late: int = 0
    completed: int = 0
    ok: int = 0
    errors: int = 0
    latency: HistogramData = HistogramData()
    latency_ms: Percentiles = Percentiles()


class Load(Figures):
    """The driver's account of one load phase (merged over its processes)."""

    model: str = "closed"
    requests: int = 0
    completed: int = 0
    ok: int = 0
    errors: dict[str, int] = {}
    elapsed_s: float = 0.0
    rps: float = 0.0
    latency: HistogramData = HistogramData()
    latency_ms: Percentiles = Percentiles()
    per_second: list[Second] = []
    cpu: list[DriverCpu] = []
    max_utilization: float = 0.0
    saturated: bool = False
    saturation_reason: str | None = None
    intended: int = 0
    late: int = 0
    unsent: int = 0
    first_send: float = 0.0
    last_response: float = 0.0
    #: up to 20 ids that got no 2xx, with the reason
    failed_ids_sample: dict[str, str] = {}
    #: a rate schedule's stages in order (``--phases``; none in files written before it)
    stages: list[StageLoad] = []

    @property
    def refused(self) -> int:
        """Requests answered 409: their id was already submitted in the run (none when ids are unique)."""
        return self.errors.get(REFUSED, 0)


# -- what the ledger says ---------------------------------------------------------------------------


class Categories(Figures):
    """Jepsen's queue categories (``total-queue``) for the ids the driver sent.

    Fractions are of ``attempted`` (0 when nothing was sent). ``unexpected`` is every id that ran
    without a 2xx: ``recovered`` of them got a non-2xx or no answer (Jepsen's "recovered": the
    outcome was unknown to the client, e.g. a 503 after the enqueue timeout), the rest were never
    sent by this load (Jepsen's "unexpected").
    """

    attempted: int = 0
    ok: int = 0  # 2xx, ran exactly once
    lost: int = 0  # 2xx, never ran
    duplicated: int = 0  # ran more than once
    unexpected: int = 0  # no 2xx, yet ran
    failed: int = 0  # 2xx, ran, and an execution raised (a user's task: the call, not the delivery, failed)
    recovered: int = 0  # of the unexpected: the driver got a non-2xx or no answer for it
    ok_frac: float = 0.0
    lost_frac: float = 0.0
    duplicated_frac: float = 0.0
    unexpected_frac: float = 0.0
    failed_frac: float = 0.0
    unexpected_ids: list[str] = []
    #: ids answered 409 (already submitted in the run, so not enqueued again): an answer, not a
    #: failure; a normal run has none, its ids being unique
    refused: int = 0


class AuditResult(Figures):
    """What happened to the accepted tasks of one case."""

    accepted: int
    executed: int
    lost: int
    duplicated: int
    extra_executions: int = 0
    late: int = 0
    unacknowledged: int = 0
    first_start: float | None = None
    last_finish: float | None = None
    end_to_end_ms: Percentiles = Percentiles()
    queue_wait_ms: Percentiles = Percentiles()
    end_to_end_histogram: HistogramData = HistogramData()
    lost_ids: list[str] = []
    duplicated_ids: list[str] = []
    #: tasks finished in each second after the load started (the drain as a curve)
    executed_per_second: list[int] = []
    #: when the load started (wall clock, as first_start and a fault's ``at``): second 0 of the curve
    start: float | None = None
    #: ledger rows that are not a valid record (left out of every other figure), and a sample of
    #: them: id -> what is wrong
    corrupt: int = 0
    corrupt_ids: dict[str, str] = {}
    #: a user's task (``--workload module:callable``): accepted ids of which an execution raised, the
    #: count of each last exception type, a sample of the ids; absent from files written before it
    failed: int = 0
    failed_types: dict[str, int] = {}
    failed_ids: list[str] = []
    #: a user's task: CPU time of each task's last execution (None: not measured, or before it)
    cpu_ms: Percentiles | None = None
    #: ok / lost / duplicated / unexpected / failed; absent from files written before it (all zero then)
    categories: Categories = Categories()

    @property
    def ok(self) -> bool:
        return self.lost == 0 and self.duplicated == 0 and self.corrupt == 0


# -- limits, faults, metrics, cleanup ---------------------------------------------------------------


class LimitStats(Model):
    """What the cgroup saw (what ``docker stats`` would show), and the CPU the component used."""

    nr_periods: int | None = None
    nr_throttled: int | None = None
    throttled_s: float | None = None
    cpu_s: float | None = None
    wall_s: float | None = None
    memory_peak_bytes: int | None = None
    memory_failcnt: int | None = None
    oom_kills: int | None = None


class LimitRecord(Model):
    """A component's CPU/memory limit: asked, how it was applied, and the CPU share used under load."""

    component: str
    cpu: float | None = None
    memory_mb: int | None = None
    applied: bool = False
    method: str | None = None  # cgroup-v2, cgroup-v1, pinning, none, none asked
    notes: list[str] = []
    paths: list[str] = []
    pids: list[int] = []
    #: share of one CPU the component used while the load ran
    load_cpu: float | None = None
    stats: LimitStats = LimitStats()


class LimitAsked(Model):
    cpu: float | None = None
    memory_mb: int | None = None


class FaultSecond(Model):
    """One second of a fault case, counted from the load's start: 2xx answers, tasks finished."""

    t: int
    accepted: int = 0
    executed: int = 0


class PromiseBound(Model):
    """One known window of a promise, resolved for a case (``taskbench.backends.bounds.Bound``): up to
    ``tasks`` (× the kills where ``per_kill``; None: any number) tasks may show ``figure`` (lost,
    duplicated, no recovery) and the promise is kept."""

    figure: str
    tasks: int | None = None
    per_kill: bool = False
    text: str = ""
    source: str = ""

    def limit(self, kills: int) -> int | None:
        return None if self.tasks is None else self.tasks * (max(kills, 1) if self.per_kill else 1)


class Promise(Model):
    """What a backend's configuration promises across a fault: the exit rule of a fault case."""

    #: a task answered 2xx runs even if a component crashes (a loss fails the case)
    keeps_accepted: bool = True
    #: a task runs at most once, or duplicates are removed (a duplicate fails the case)
    no_duplicates: bool = False
    text: str = ""
    #: what the case's fault may cost and still keep the promise (results before issue 34: none, the
    #: two flags above decide)
    bounds: list[PromiseBound] = []


class BrokerRestart(Model):
    """``restart-broker``: the broker server stopped and started again on the same port and data."""

    signal: str  # SIGKILL (a crash) or SIGTERM (a clean stop)
    port: int
    fsync: str  # Redis: its AOF policy (always | everysec | no | none); RabbitMQ/NATS: what their store keeps
    old_pid: int
    broker: str = "redis"  # redis | rabbitmq | nats (results before it: redis)
    new_pid: int | None = None
    exit_code: int | None = None
    down_at: float | None = None  # wall clock: the old server was gone (its pid reaped, its port refused)
    up_at: float | None = None  # wall clock: the new server answered PING
    down_s: float | None = None
    #: what was observed that proves it: the old pid gone, the port refusing, a new pid answering
    proof: list[str] = []
    #: from the ledger: executed tasks the driver sent before the broker went down (0: the load had not
    #: begun), and those of them that started after it was back (held across the restart, or still in
    #: flight to the API when it went down: the send time is the driver's)
    sent_before: int | None = None
    sent_before_ran_after: int | None = None


class FaultRecord(Model):
    """An injected fault and what it cost (times in seconds after the fault).

    Fields after ``executing_again_s`` came with the fault matrix (issue 14); files written before
    it load with their defaults.
    """

    fault: str
    target: str = ""
    injected: bool = False
    #: injected after the load had ended, while the drain worked off the backlog (a short load)
    during_drain: bool = False
    note: str | None = None
    error: str | None = None
    at: float | None = None
    killed_pid: int | None = None
    killed_exit_code: int | None = None
    restarted_pid: int | None = None
    ready_after_s: float | None = None
    #: None while injected means "never" (the rate did not come back)
    accepting_again_s: float | None = None
    executing_again_s: float | None = None  # back to 50 % of the pre-fault execution rate
    #: the load's start (wall clock): second 0 of ``timeline``
    load_start: float | None = None
    #: the load's first request (wall clock, from the ledger): the driver starts up after load_start
    first_send: float | None = None
    #: when a fault that lasts (pause, stall) ended
    ended: float | None = None
    #: every kill (wall clock) and how long each restarted process took to be ready
    kills: list[float] = []
    restarts_ready_s: list[float] = []
    #: what was observed that shows the fault happened
    proof: list[str] = []
    first_execution_s: float | None = None  # the first task started after the fault, finished
    executing_90_s: float | None = None  # back to 90 % of the pre-fault execution rate
    pre_fault_rate: float | None = None  # executions per second before the fault
    post_recovery_rate: float | None = None  # over an equal window from the 90 % (else 50 %) point
    throughput_ratio: float | None = None  # post_recovery_rate / pre_fault_rate
    recovered: bool | None = None  # None: no pre-fault rate to judge by
    promise: Promise | None = None
    #: the figures the fault cost inside the promise's bounds, each with the bound that allows it
    within_bounds: list[str] = []
    timeline: list[FaultSecond] = []
    broker_restart: BrokerRestart | None = None  # restart-broker only


class MetricsCheck(Model):
    """The processes' own counters against the ledger: succeeded must equal executions."""

    components: dict[str, dict[str, float | str]] = {}
    totals: dict[str, float] = {}
    ledger_executions: int = 0
    match: bool = False
    errors: list[str] = []
    note: str | None = None


class Cleanup(Model):
    kept: bool = False
    prefix: str | None = None
    patterns: list[str] = []
    deleted_keys: int | None = None
    purge: str | None = None


# -- the figures of a row ---------------------------------------------------------------------------


class Spread(Figures):
    """A case run several times: the row is the median run by ``figure``; these are the extremes."""

    runs: int
    figure: str
    min: float
    max: float


class Summary(Figures):
    """The figures a table shows for one case; which ones are set depends on the case's kind."""

    # load (queue and http)
    requests: int | None = None
    rps: float | None = None
    p50_ms: float | None = None
    p95_ms: float | None = None
    p99_ms: float | None = None
    errors_pct: float | None = None
    driver_cpu_pct: float | None = None
    driver_saturated: bool = False
    # queue: the audit
    time_to_run_all_s: float | None = None
    accepted: int | None = None
    executed: int | None = None
    lost: int | None = None
    duplicated: int | None = None
    #: executions beyond each task's first, summed: with a broadcast wiring, (workers - 1) x accepted
    extra_executions: int | None = None
    unexpected: int | None = None
    refused: int | None = None  # answered 409: the id was already submitted (not in errors_pct)
    late: int | None = None
    e2e_p95_ms: float | None = None
    #: the workers' rate: executions per second from the first task's start to the last one's finish
    executed_per_s: float | None = None
    # queue: a user's task (--workload module:callable)
    failed: int | None = None  # accepted tasks of which an execution raised (audit.failed)
    failed_types: dict[str, int] | None = None  # the last exception type -> failed tasks
    cpu_p50_ms: float | None = None  # CPU time of one execution (audit.cpu_ms)
    cpu_p95_ms: float | None = None
    rss_start_mb: float | None = None  # the workers' resident memory (the API's for background): first sample
    rss_peak_mb: float | None = None
    rss_end_mb: float | None = None  # the last sample, after the drain: a leak is end well above start
    #: ``--find-max-rate``: the highest offered rate that met the objective (requests per second)
    sustainable_rps: float | None = None
    signed = frozenset({"restart_ready_s", "accepting_again_s", "executing_again_s", "executing_90_s",
                        "first_execution_s"})
    # queue: an injected fault
    fault: str | None = None
    restart_ready_s: float | None = None
    accepting_again_s: float | None = None
    executing_again_s: float | None = None
    executing_90_s: float | None = None
    first_execution_s: float | None = None
    throughput_ratio: float | None = None
    # http
    concurrency: float | None = None
    server_processes_seen: int | None = None
    #: threads that ran the endpoint's requests, over every server process (native ids, counted by the app)
    threads_seen: int | None = None
    #: the most TCP connections established to the server at once during the load (its port, /proc/net/tcp)
    connections_peak: int | None = None
    server_cpu_s: float | None = None
    max_users: int | None = None
    peak_rps: float | None = None
    # celery
    tasks: int | None = None
    elapsed_s: float | None = None
    tasks_per_s: float | None = None
    cpu_s: float | None = None
    max_parallel: int | None = None
    # repeated cases
    spread: Spread | None = None

    def figure(self, name: str) -> Any:
        """A figure by its field name (columns are declared by name and checked against the fields)."""
        if name not in Summary.model_fields:
            raise KeyError(f"no figure {name!r} in a summary")
        return getattr(self, name)


class RssRecord(Figures):
    """Resident memory of the processes that ran the tasks (each worker with its children; the API for
    ``background``), summed, sampled every :attr:`interval_s` from the load's start to the drain's end."""

    interval_s: float = 1.0
    samples_mb: list[float] = []
    start_mb: float = 0.0
    peak_mb: float = 0.0
    end_mb: float = 0.0
    processes: list[str] = []


class RepeatRun(Model):
    summary: Summary
    status: Status


class SeriesPoint(Model):
    """HTTP cases: one second of the load (users, responses, failures)."""

    t: int
    users: int
    rps: int
    errors: int


