"""The result vocabulary, part 2: the cases (queue, http, celery) and the result file, with its schema version."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, field_validator

from taskbench.redaction import redact_argv, redact_text
from taskbench.results.api_scrape import ApiScrapeRecord
from taskbench.results.faults import FaultRecord
from taskbench.results.limits import Cleanup, LimitAsked, LimitRecord, MetricsCheck
from taskbench.results.load import BacklogSecond, PhaseRecord, RateSearch
from taskbench.results.model import AuditResult, CaseKind, Load, Model, Status
from taskbench.results.soak import SoakRecord
from taskbench.results.summary import RepeatRun, RssRecord, SeriesPoint, Summary

SCHEMA_VERSION = 2


# -- cases -------------------------------------------------------------------------------------------


class CaseBase(Model):
    """What every case has: its identity, the row's figures, its status and why."""

    kind: CaseKind
    #: scenario cases: the case number, its label, its parameters and the article's figures
    index: int | None = None
    label: str | None = None
    params: dict[str, Any] = {}
    article: dict[str, float | str] | None = None
    limits_asked: dict[str, LimitAsked] = {}
    limits: dict[str, LimitRecord] = {}
    summary: Summary = Summary()
    status: Status = "failed"
    failures: list[str] = []
    exit_codes: dict[str, int | None] = {}
    #: per started component (api, worker-0, server, ...), the most processes its tree held during the
    #: load: itself and its descendants (uvicorn's parent and workers, a Celery worker and its pool's forks)
    processes: dict[str, int] = {}
    repeats: list[RepeatRun] = []
    logs: str | None = None

    @field_validator("failures")
    @classmethod
    def _redacted_failures(cls, value: list[str]) -> list[str]:
        return [redact_text(text) for text in value]

    @property
    def name(self) -> str:
        """What a table calls the row."""
        return self.label or f"case {self.index}"

    @property
    def errors_expected(self) -> bool:
        """Failed requests are a figure of this case, not a failure: a scenario measures them."""
        return self.index is not None


class QueueCase(CaseBase):
    """One backend under one configuration: load through the API, drain, audit of the ledger."""

    kind: Literal["queue"] = "queue"
    backend: str
    broker: str = "redis"
    #: --broker-delay: milliseconds each way through the delay proxy (None: the broker was reached directly)
    broker_delay_ms: float | None = None
    workload: str = "io/simple"
    enqueue_mode: str = "awaited"
    #: the broker's configuration keeps an acknowledged task across a broker restart; without it nothing is
    #: promised, so tasks lost in a restart are a figure, not a failure
    durable: bool = True
    #: why ``durable`` is what it is, from the broker's reported configuration ("" in older files)
    durability: str = ""
    has_worker: bool = True
    #: non-empty: the backend is an unsafe seed wiring (``BackendInfo.unsafe``), and why: its lost and
    #: duplicated tasks are what the case measures
    unsafe: str = ""
    workers: int = 0
    concurrency: int = 0
    #: the library options that change the backend's promise, as the case ran them (``--option LIB.KEY=VALUE``;
    #: the libraries' defaults unless given; older files name them ``<library>_<key>``)
    promise_settings: dict[str, Any] = {}
    #: what the backend promised across a dead worker under them: ``guarantee: recovery`` ("" in older files)
    delivery: str = ""
    run_id: str = ""
    placement: dict[str, list[int] | None] = {}
    fault: FaultRecord | None = None
    fault_limits: dict[str, LimitRecord] = {}
    #: workers that exited on their own and were started again (``--restart-workers``), one line each
    revived: list[str] = []
    metrics: MetricsCheck | None = None
    cleanup: Cleanup | None = None
    load: Load | None = None
    audit: AuditResult | None = None
    #: a user's task: the task processes' resident memory over the load and the drain
    rss: RssRecord | None = None
    #: ``--phases``: a row of figures per phase, and the backlog per second they are read from
    phases: list[PhaseRecord] = []
    backlog: list[BacklogSecond] = []
    #: ``--find-max-rate``: the search's steps and the rate it found
    rate_search: RateSearch | None = None
    #: ``--soak``: the series over time, their growth and the drift verdict
    soak: SoakRecord | None = None
    #: ``--scrape-api``: the API's /metrics read through the load and the drain
    api_scrape: ApiScrapeRecord | None = None

    @property
    def name(self) -> str:
        name = self.label or self.backend
        return f"{name} [UNSAFE]" if self.unsafe and "unsafe" not in name.lower() else name

    @property
    def errors_expected(self) -> bool:
        """Also when an injected fault had the API down (those failed requests are the fault's cost), when a
        worker died on its own and ``--restart-workers`` started it again (its redeliveries are that death's
        cost, judged like a fault's: a loss or duplicate the backend promises to prevent is ``failed``), and
        on an unsafe seed wiring (its lost and duplicated tasks are the figures it is run for); and under
        ``--phases`` (a burst or a stalled broker may cost answers) and ``--find-max-rate`` (its steps go past
        the limit on purpose), whose failed requests are figures of their phase or step."""
        return (super().errors_expected or (self.fault is not None and self.fault.injected) or bool(self.revived)
                or bool(self.unsafe) or bool(self.phases) or self.rate_search is not None)


class HttpCase(CaseBase):
    """One server and app variant under HTTP load: no queue, no ledger."""

    kind: Literal["http"] = "http"
    server_argv: list[str] = []
    load: Load | None = None
    series: list[SeriesPoint] = []

    _redacted = field_validator("server_argv")(redact_argv)


class CeleryCase(CaseBase):
    """Celery workers with one execution pool, fed by a probe that enqueues and waits."""

    kind: Literal["celery"] = "celery"
    worker_argv: list[list[str]] = []
    probe: dict[str, Any] = {}

    @field_validator("worker_argv")
    @classmethod
    def _redacted(cls, value: list[list[str]]) -> list[list[str]]:
        return [redact_argv(argv) for argv in value]


#: the three servers ``taskbench overhead`` loads per backend, in this order in every table
OverheadServer = Literal["ceiling", "floor", "taskbench"]
OVERHEAD_SERVERS: tuple[OverheadServer, ...] = ("ceiling", "floor", "taskbench")


class OverheadRound(Model):
    """One server under one load: which server, which round, what the driver saw."""

    server: OverheadServer
    round: int
    #: ``together``: the server loaded at the same time as this one (None: loaded alone)
    beside: OverheadServer | None = None
    argv: list[str] = []
    load: Load
    #: the server's CPU time (its process and children) while the load ran, and per completed request
    server_cpu_s: float | None = None
    cpu_us_per_request: float | None = None

    _redacted = field_validator("argv")(redact_argv)


class OverheadCase(CaseBase):
    """One backend: the ceiling (FastAPI + one INCR), the library's floor (its documented enqueue in a
    bare FastAPI endpoint) and taskbench's reference API, loaded alike over rounds.

    ``method``: ``together`` (in a round the floor and taskbench's API are loaded at once, side by side on
    the API's cores, then the ceiling and the floor, so each pair's rates cover the same seconds) or
    ``sequential`` (one server after another, the order rotating; results written before ``together``
    existed are ``sequential``). ``rps`` holds each server's median over its rounds (``together``: the
    floor and taskbench from their pair, the ceiling from its pair with the floor); ``ratio`` is
    taskbench ÷ floor, the share of the library's own rate that taskbench keeps (1.0: taskbench costs
    nothing measurable): with ``together`` the median of the rounds' ratios (``ratio_rounds``), else the
    ratio of the medians. ``cpu_ratio`` is the same comparison on the server's CPU time per request.
    """

    kind: Literal["overhead"] = "overhead"
    backend: str
    workload: str = "io/simple"
    method: Literal["together", "sequential"] = "sequential"
    placement: dict[str, list[int] | None] = {}
    rounds: list[OverheadRound] = []
    rps: dict[str, float] = {}
    ratio: float | None = None
    ratio_rounds: list[float] = []
    cpu_ratio_rounds: list[float] = []
    floor_vs_ceiling: float | None = None
    #: each server's median CPU µs per request, and floor ÷ taskbench of it (1.0: taskbench costs no CPU)
    cpu_us_per_request: dict[str, float] = {}
    cpu_ratio: float | None = None

    @property
    def name(self) -> str:
        return self.label or self.backend

    def figures(self, server: str) -> list[OverheadRound]:
        """The rounds a server's figures come from: ``together`` loads the floor twice a round, and its
        figures are those beside taskbench's API (the ratio's pair), not beside the ceiling."""
        return [r for r in self.rounds if r.server == server and not (server == "floor" and r.beside == "ceiling")]


Case = Annotated[QueueCase | HttpCase | CeleryCase | OverheadCase, Field(discriminator="kind")]


def passed(case: CaseBase) -> bool:
    """The one rule for a case's exit status.

    ``ok`` passes and ``failed`` (a lost or duplicated task, a drain timeout, a dead process) fails;
    ``errors`` (some requests got no 2xx; or, after an injected fault, tasks were lost or ran twice
    that the backend's configuration does not promise to keep or to run once) passes only where these
    are what the case measures: a scenario's case, a run with an injected fault, or a case of an unsafe
    seed wiring (``faststream-pubsub``: its duplicates are measured, never a pass of the wiring). A fault case whose
    backend broke its promise (a loss it promises to prevent, a duplicate where it promises at most
    once) or that never recovered is ``failed`` (harness/faults/recovery.py, ``broken_promises``).
    """
    return case.status == "ok" or (case.status == "errors" and case.errors_expected)


# -- the whole result --------------------------------------------------------------------------------


class Calibration(Model):
    task: str
    best_of: int
    cpu_ms: float


class Machine(Model):
    hostname: str = ""
    system: str = ""
    machine: str = ""
    cpu_model: str = ""
    logical_cpus: int | None = None
    usable_cpus: list[int] | None = None
    memory_bytes: int | None = None
    python: str = ""
    implementation: str = ""
    cpu_calibration: Calibration | None = None


class Commit(Model):
    commit: str | None = None
    branch: str | None = None
    dirty: bool | None = None


class ScenarioInfo(Model):
    name: str
    description: str
    kind: CaseKind
    file: str
    seed: str | None = None
    article: dict[str, Any] = {}
    varying: list[str] = []
    #: the file's [profile.NAME] the run applied (``run --profile``); None: the file's own scale
    profile: str | None = None


class Result(Model):
    """One result file: what ran (config or scenario), where, from which commit, and every case."""

    schema_version: int = SCHEMA_VERSION
    kind: Literal["run", "scenario", "overhead"]
    run_id: str
    created: str
    finished: str | None = None
    command: list[str] = []
    #: a run's parameters (``taskbench run``); None for a scenario, whose cases carry theirs
    config: dict[str, Any] | None = None
    scenario: ScenarioInfo | None = None
    environments: dict[str, dict[str, Any]] = {}
    redis: dict[str, Any] | None = None
    machine: Machine = Machine()
    commit: Commit = Commit()
    cases: list[Case] = []
    #: set when Ctrl-C or SIGTERM stopped the run: the phase it was in; the cases hold what was measured
    interrupted: str | None = None

    # what a result records of command lines and URLs never holds a password: a file written before
    # this rule (or by hand) is masked when it is read, so no page renders one either
    _redacted_command = field_validator("command")(redact_argv)

    def passed(self) -> bool:
        return not self.interrupted and all(passed(case) for case in self.cases)

    def redacted(self) -> Result:
        """This result validated again, so that failures and parameters added to it after it was made
        pass the redaction too (a list appended to is not validated)."""
        return type(self).model_validate(self.model_dump())

    def to_json(self) -> str:
        return self.redacted().model_dump_json(indent=1)
