"""The result vocabulary, part 1: the base models and the records of a case's load and audit.

The harness builds these, the renderers (terminal table, scenario table, markdown) read them, and
nothing passes results around as ``dict[str, Any]``. Every model forbids unknown fields, so a renamed
figure fails where it is written, not when a report renders. A case's limits, fault and cleanup are in
:mod:`taskbench.results.faults`, its row's figures in :mod:`taskbench.results.summary`, the cases and the
whole result in :mod:`taskbench.results.cases`; files of older schemas are converted by
:mod:`taskbench.results.migrate`.
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal, Self

from pydantic import BaseModel, ConfigDict, ValidationInfo, field_validator, model_validator

from taskbench.redaction import redact_data

Status = Literal["ok", "errors", "failed"]
#: the driver's error kind of a 409: the task id was already submitted in the run (an answer of the
#: API's idempotency contract, not a failure of the backend)
REFUSED = "http_409"
CaseKind = Literal["queue", "http", "celery", "overhead"]


class Model(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True)

    # every string of a result, at any depth, is redacted as it is built, assigned or read: a URL's
    # password or token (a label "target http://u:pw@…", a config value) never reaches a file or a page
    @field_validator("*")
    @classmethod
    def _no_secret_in_any_string(cls, value: Any) -> Any:
        return redact_data(value)


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
    lost: int = 0  # 2xx, never started
    duplicated: int = 0  # ran more than once
    unexpected: int = 0  # no 2xx, yet ran
    failed: int = 0  # 2xx, ran, and an execution raised (a user's task: the call, not the delivery, failed)
    #: 2xx, started and never finished (a user's task that hangs, or that the library's time limit cut):
    #: Jepsen's "indeterminate", neither lost nor ok
    indeterminate: int = 0
    recovered: int = 0  # of the unexpected: the driver got a non-2xx or no answer for it
    ok_frac: float = 0.0
    lost_frac: float = 0.0
    duplicated_frac: float = 0.0
    unexpected_frac: float = 0.0
    failed_frac: float = 0.0
    indeterminate_frac: float = 0.0
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
    #: a user's task: accepted ids that started (the ledger's start record) and never finished, a sample of
    #: them, and when the first of them started (wall clock); absent from files written before it
    indeterminate: int = 0
    indeterminate_ids: list[str] = []
    indeterminate_since: float | None = None
    #: ok / lost / duplicated / unexpected / failed / indeterminate; absent from files written before it (all zero then)
    categories: Categories = Categories()

    @property
    def ok(self) -> bool:
        return self.lost == 0 and self.duplicated == 0 and self.corrupt == 0
