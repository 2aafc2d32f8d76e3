"""Every parameter of a run, declared once: its type, default, bounds or choices, help, and where it applies.

A parameter applies to any of:

- the ``taskbench run`` command line (``cli``), and so to :class:`~taskbench.harness.config.RunConfig`;
- the cases of a scenario kind (``kinds``: queue, http, celery), as the TOML files spell it;
- the TASKBENCH_* environment of the API and worker processes (``env``), which
  :class:`~taskbench.settings.Settings` reads back.

The command line (:func:`option`, :func:`default`), the scenario files' validation
(:func:`for_kind`, :meth:`Param.problem`), ``taskbench scenarios --parameters`` (:meth:`Param.describe`),
RunConfig's checks (:func:`by_attr`) and the processes' environment (:func:`settings_env`) all read
this table. A name means the same everywhere except where a scenario kind gives it its own entry
(the celery ``timeout`` is a case's limit, not a request's).

Neutral: imports nothing from the harness, the driver, the scenarios or the CLI.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Final

from taskbench import brokers
from taskbench.brokers.redis import FSYNC_POLICIES

KINDS: Final = ("queue", "http", "celery")
COMPONENTS: Final = ("api", "worker")
_Q, _H, _C = ("queue",), ("http",), ("celery",)
_QH = ("queue", "http")
POOLS: Final = ("prefork", "solo", "threads", "gevent", "eventlet")


@dataclass(frozen=True, kw_only=True)
class Param:
    name: str
    type: type
    default: Any = None
    help: str
    bounds: tuple[float, float] | None = None  # inclusive; ints for an int parameter
    choices: tuple[str, ...] | None = None
    cli: bool = False  # an option of `taskbench run` and a field of RunConfig (or of its LoadSpec)
    kinds: tuple[str, ...] = ()  # scenario kinds whose cases take it
    env: str | None = None  # TASKBENCH_<env>, the Settings field it sets (lower case)
    components: tuple[str, ...] = COMPONENTS  # the processes whose environment carries it
    attr: str | None = None  # the RunConfig attribute, when not ``name``; "" if none holds it as declared
    kind_defaults: dict[str, Any] = field(default_factory=dict)  # a kind whose default differs
    unit: str | None = None  # a duration's, s or ms: its option takes 30s, 2m, 1h (taskbench.units)

    @property
    def flag(self) -> str:
        return "--" + self.name.replace("_", "-")

    @property
    def attribute(self) -> str:
        """The attribute of RunConfig that holds it ("" if none)."""
        return self.name if self.attr is None else self.attr

    def default_for(self, kind: str) -> Any:
        return self.kind_defaults.get(kind, self.default)

    def describe(self) -> str:
        """``int 1..10000``, ``closed | open | ramp`` or ``str``: what ``scenarios --parameters`` shows."""
        if self.choices:
            return " | ".join(self.choices)
        if self.bounds:
            low, high = (f"{v:d}" if self.type is int else f"{v:g}" for v in self.bounds)
            return f"{self.type.__name__} {low}..{high}"
        return self.type.__name__

    def problem(self, value: Any, *, option: bool = False) -> str | None:
        """What is wrong with ``value`` (None: nothing), worded for a scenario file or, with
        ``option``, for a command-line option (``--name must ...``)."""
        name = self.flag if option else self.name
        ok = isinstance(value, self.type) and (self.type is bool or not isinstance(value, bool))
        if self.type is float and isinstance(value, int) and not isinstance(value, bool):
            ok = True
        if not ok:
            return f"{name} must be {self.type.__name__}, got {value!r}"
        if isinstance(value, float) and not math.isfinite(value):  # NaN fails no comparison of a bound
            return f"{name} must be a finite number, got {value!r}"
        if self.choices and value not in self.choices:
            if option:
                listed = f"{', '.join(self.choices[:-1])} or {self.choices[-1]}"
                return f"{name} must be {listed}, not {value!r}"
            return f"{name} must be one of {', '.join(self.choices)}, got {value!r}"
        if self.bounds and not self.bounds[0] <= value <= self.bounds[1]:
            return f"{name} must be between {self.bounds[0]} and {self.bounds[1]}, got {value!r}"
        return None

    def check(self, value: Any) -> None:
        """Raise ValueError worded for the command line if ``value`` is out of the schema."""
        problem = self.problem(value, option=True)
        if problem:
            raise ValueError(problem)


_LABEL = "row label; {name} is replaced by the case's value of name"
_REPEAT = "runs of the case, each in fresh processes; the table shows the median run"

# The order is the order of each kind's parameters (`scenarios --parameters` sorts; a scenario's
# varying keys and so its labels follow it).
SCHEMA: Final[tuple[Param, ...]] = (
    # -- celery-only (before the load parameters, which celery cases do not take) --
    Param(name="pool", type=str, default="prefork", choices=POOLS, help="execution pool", kinds=_C),
    Param(name="concurrency", type=int, default=10, bounds=(0, 10_000),
          help="pool size (0: no -c, Celery's own default: one per core for prefork)", kinds=_C),
    Param(name="test", type=str, choices=("io", "cpu", "chord", "routing", "process"),
          help="what is measured (process: a CPU task run in a ProcessPoolExecutor the task opens)", kinds=_C),
    Param(name="tasks", type=int, default=100, bounds=(1, 100_000), help="tasks enqueued", kinds=_C),
    Param(name="delay", type=float, default=0.05, bounds=(0.0, 60.0),
          help="seconds the local HTTP server waits (io, chord)", kinds=_C),
    Param(name="cpu_iterations", type=int, default=1_000_000, bounds=(0, 100_000_000),
          help="CPU work per cpu task", kinds=_C),
    Param(name="chord_size", type=int, default=5, bounds=(1, 1000), help="parallel calls of the chord", kinds=_C),
    Param(name="io_pool", type=str, choices=POOLS, help="routing: the io worker", kinds=_C),
    Param(name="io_concurrency", type=int, bounds=(1, 10_000), help="routing: the io worker's pool size",
          kinds=_C),
    Param(name="timeout", type=float, default=120.0, bounds=(1, 3600), help="longest a case may take, seconds",
          kinds=_C),
    # -- the load (the driver's LoadSpec) --
    Param(name="model", type=str, default="closed", choices=("closed", "open", "ramp"), help="load model",
          cli=True, kinds=_QH),
    Param(name="users", type=int, default=100, bounds=(1, 10_000),
          help="concurrent users (open model: connections)", cli=True, kinds=_QH),
    Param(name="rate", type=float, bounds=(0.001, 1e6),
          help="open model: requests per second (a rate makes the default closed model open)", cli=True, kinds=_QH),
    Param(name="ramp", type=float, default=10.0, bounds=(0.001, 10_000), help="ramp model: users added per second",
          cli=True, kinds=_QH),
    Param(name="pace", type=float, bounds=(0.0, 3600),
          help="closed/ramp: each user starts a request at most every PACE s", kinds=_QH),
    Param(name="keepalive", type=bool, default=True,
          help="closed/ramp: a user keeps its connection (false: a new TCP connection a request, as ab without -k)",
          kinds=_QH),
    Param(name="requests", type=int, bounds=(1, 10_000_000), help="requests per case (request bound)", cli=True,
          kinds=_QH),
    Param(name="duration", type=float, bounds=(0.1, 86_400), help="seconds per case (time bound)", cli=True,
          kinds=_QH, unit="s"),
    Param(name="timeout", type=float, default=30.0, bounds=(0.1, 600), help="per-request timeout, seconds",
          cli=True, kinds=_QH, unit="s"),
    Param(name="driver_processes", type=int, default=1, bounds=(1, 64), help="load generator processes",
          cli=True, kinds=_QH),
    Param(name="warmup", type=int, default=200, bounds=(0, 100_000), help="warm-up requests per case", cli=True,
          kinds=_QH, kind_defaults={"http": 0}),
    Param(name="limits", type=str, help="name of a [limits.NAME] set", kinds=KINDS),
    # -- the queue benchmark: `run` and queue scenarios; most reach the processes' environment --
    Param(name="backend", type=str, help="backend name", kinds=_Q, env="BACKEND", attr=""),
    Param(name="redis_url", type=str, help="use this Redis instead of an embedded one", cli=True,
          env="REDIS_URL", attr=""),
    Param(name="run_id", type=str, help="key namespace of the run", env="RUN_ID", attr=""),
    Param(name="workload", type=str, default="io/simple",
          help="io/simple, io/sync, io/thread, cpu/simple, cpu/process, or your own task: module:callable or "
               "path/to/file.py:callable (sync or async, called with the payload)", cli=True, kinds=_Q),
    Param(name="payload", type=str,
          help="with --workload module:callable: a JSON file, the payload template each call gets; the string "
               "{task_id} in it is replaced by the task's id (default: {\"task_id\": \"{task_id}\"})",
          cli=True, kinds=_Q),
    Param(name="task", type=str, help="the user's task, module:callable or /abs/file.py:callable (from --workload)",
          env="TASK"),
    Param(name="task_path", type=str, help="folders put first on sys.path for the user's task (--path, and the "
          "task file's own folder), joined by os.pathsep", env="TASK_PATH"),
    Param(name="workers", type=int, default=1, bounds=(1, 64), help="worker processes per backend", cli=True,
          kinds=_Q),
    Param(name="concurrency", type=int, default=10, bounds=(1, 10_000), help="tasks at once per worker",
          cli=True, kinds=_Q, env="CONCURRENCY"),
    Param(name="enqueue_mode", type=str, default="awaited", choices=("awaited", "after-response"),
          help="when the API enqueues", cli=True, kinds=_Q, env="ENQUEUE_MODE"),
    Param(name="broker", type=str, default="redis", choices=brokers.NAMES,
          help="broker, where the backend supports it", cli=True, kinds=_Q, env="BROKER"),
    Param(name="broker_url", type=str,
          help="the broker's URL (RabbitMQ/NATS default: the local server; Redis default: an embedded broker "
               "beside the ledger's, or --redis-url; PostgreSQL default: a private server started for each "
               "case)", cli=True, env="BROKER_URL"),
    Param(name="redis_fsync", type=str, default="always", choices=FSYNC_POLICIES,
          help="the embedded broker Redis's AOF fsync policy (none: no persistence); only always keeps every "
               "acknowledged task across a broker restart", cli=True, kinds=_Q),
    Param(name="postgres_durability", type=str, default="fsync", choices=("fsync", "async-commit", "none"),
          help="the private broker PostgreSQL's durability: fsync (its defaults: every commit on disk), "
               "async-commit (synchronous_commit off: a crash may lose the last commits), none (fsync off)",
          cli=True, kinds=_Q),
    Param(name="broker_delay", type=float, bounds=(0.0, 1000.0),
          help="milliseconds added each way between the API/workers and the broker, through a delaying TCP "
               "proxy (0: through the proxy with no delay; unset: direct)", cli=True, kinds=_Q, unit="ms"),
    Param(name="io_delay", type=float, default=0.0, bounds=(0.0, 60.0), help="simulated I/O seconds per task",
          cli=True, kinds=_Q, env="IO_DELAY", unit="s"),
    Param(name="cpu_iterations", type=int, default=200_000, bounds=(0, 100_000_000),
          help="CPU work per cpu/* task", cli=True, kinds=_Q, env="CPU_ITERATIONS"),
    Param(name="threads", type=int, default=3, bounds=(1, 1024), help="io/thread pool size (seed: 3)",
          env="THREADS"),
    Param(name="processes", type=int, default=3, bounds=(1, 256), help="cpu/process pool size (seed: 3)",
          env="PROCESSES"),
    Param(name="drain_timeout", type=float, default=120.0, bounds=(1, 3600),
          help="seconds to wait for tasks after the load", cli=True, kinds=_Q, unit="s"),
    Param(name="drain_stall", type=float, default=60.0, bounds=(5, 3600),
          help="seconds without a single execution after which the drain stops waiting and counts the rest "
               "lost (never less than twice the task timeout + 10 s, when a dead worker's tasks come back)",
          cli=True, kinds=_Q, unit="s"),
    Param(name="scrape_api", type=float, default=0.0, bounds=(0, 3600),
          help="read the API's /metrics every this many seconds through the load and the drain, as a Prometheus "
               "beside it would (a scrape fails after 10 s, Prometheus's default timeout, and is late past the "
               "interval); the result keeps each scrape, the failed and late ones, and the API's request count "
               "beside the driver's answers (0: off)",
          cli=True, kinds=_Q, unit="s"),
    Param(name="shutdown_timeout", type=float, default=10.0, bounds=(0.0, 600.0),
          help="seconds a process may take to stop", env="SHUTDOWN_TIMEOUT", attr="stop_timeout"),
    Param(name="task_timeout", type=float, default=60.0, bounds=(1, 86_400),
          help="longest a task may run; also when a dead worker's task is retried", cli=True, kinds=_Q,
          env="TASK_TIMEOUT", unit="s"),
    # -- a library's own settings: one typed model in its backend package (taskbench.backends.options) --
    Param(name="options", type=dict,
          help="the libraries' settings, a table per library ([options.saq] retries = 3); each is checked by the "
               "library's model (`taskbench backends` lists them)", kinds=_Q, attr=""),
    Param(name="producer_threads", type=int, default=32, bounds=(1, 1024),
          help="threads that run a synchronous library's enqueue in the API, each call bounded by "
               "--enqueue-timeout", cli=True, kinds=_Q, env="PRODUCER_THREADS",
          components=("api",)),
    Param(name="versions", type=str, default="lock", choices=("lock", "article-000"),
          help="the libraries' versions: lock (the lock file's, current) or a seed's pinned set (pinned/<name>/: "
               "article-000 is seed 000's arq 0.25.0, saq 0.12.4, faststream 0.4.7 (faststream-pubsub) and celery "
               "5.3.6 (--option celery.pool=prefork) behind its API's fastapi 0.108.0, for those backends only)",
          cli=True, kinds=_Q),
    Param(name="enqueue_timeout", type=float, default=5.0, bounds=(0.1, 600.0),
          help="seconds the API waits for the broker to take a task; past it the answer is 503, outcome unknown",
          cli=True, kinds=_Q, env="ENQUEUE_TIMEOUT", components=("api",), unit="s"),
    Param(name="idempotency", type=bool, default=True,
          help="task_id is an idempotency key: a known id gets 409, never a second run (off: to measure its cost)",
          cli=True, kinds=_Q, env="IDEMPOTENCY"),
    Param(name="http_metrics", type=bool, default=True, help="the API's HTTP request metrics middleware",
          cli=True, env="METRICS", components=("api",)),
    Param(name="restart_workers", type=bool,
          help="start again a worker that exits on its own during the load or the drain, as a supervisor "
               "(the seed's compose: restart: on-failure) would; off: its exit fails the case. Default: on "
               "with --fault, off without", cli=True, kinds=_Q),
    Param(name="api_port", type=int, bounds=(1, 65535), help="API port (default: a free one)", cli=True),
    Param(name="fault", type=str, help="KIND@T, KIND@T+D or KIND@T/P: kill-worker@T (or @T/P), kill-api@T, "
          "pause-worker@T+D, stall-broker@T+D, restart-broker@T, restart-broker-term@T; "
          "delay-broker=Xms is --broker-delay X (docs/faults.md)",
          cli=True, kinds=_Q, attr=""),  # RunConfig holds it parsed
    # -- the http scenarios' app and server --
    Param(name="endpoint", type=str,
          choices=("async-sleep", "def-sleep", "def-sleep-model", "async-blocking", "hello"), help="the route",
          kinds=_H),
    Param(name="delay", type=float, default=0.05, bounds=(0.0, 60.0), help="seconds the endpoint waits",
          kinds=_H),
    Param(name="middleware", type=str, default="none", choices=("none", "base", "asgi"),
          help="BaseHTTPMiddleware or pure ASGI", kinds=_H),
    Param(name="layers", type=int, default=0, bounds=(0, 50), help="stacked middleware", kinds=_H),
    Param(name="middleware_work", type=str, default="pass", choices=("pass", "write", "sleep"),
          help="what each middleware does", kinds=_H),
    Param(name="middleware_sleep", type=float, default=0.01, bounds=(0.0, 10.0),
          help="asyncio.sleep of each middleware (work = sleep)", kinds=_H),
    Param(name="thread_limit", type=int, bounds=(1, 10_000), help="AnyIO thread limiter tokens (FastAPI default 40)",
          kinds=_H),
    Param(name="thread_limit_via", type=str, default="limiter", choices=("limiter", "runvar"),
          help="how thread_limit is set: current_default_thread_limiter().total_tokens, or seed 004's "
               "RunVar('_default_thread_limiter').set(CapacityLimiter(n))", kinds=_H),
    Param(name="server", type=str, default="uvicorn", choices=("uvicorn", "hypercorn", "granian"),
          help="ASGI server", kinds=_H),
    Param(name="server_workers", type=int, default=1, bounds=(1, 64), help="server worker processes", kinds=_H),
    Param(name="worker_class", type=str, default="uvloop", choices=("asyncio", "uvloop", "trio"),
          help="event loop (hypercorn's -k)", kinds=_H),
    Param(name="environment", type=str, default="servers", choices=("servers", "article-000", "article-004"),
          help="the server's libraries: servers (the lock's current versions) or a pinned set of an article's "
               "(pinned/<name>/: article-000 has seed 000's fastapi 0.108.0 on AnyIO 4.3.0, article-004 seed "
               "004's fastapi 0.94.1 on AnyIO 3.6.2)", kinds=_H),
    # -- every scenario kind --
    Param(name="label", type=str, help=_LABEL, kinds=KINDS),
    Param(name="repeat", type=int, default=1, bounds=(1, 20), help=_REPEAT, kinds=KINDS),
    # -- `run --scenario` only: a [profile.NAME] table of the file overrides every case --
    Param(name="profile", type=str, help="with --scenario: apply the file's \\[profile.NAME], e.g. article",
          cli=True, attr=""),
)


def for_kind(kind: str) -> dict[str, Param]:
    """The parameters a case of this scenario kind takes, in schema order."""
    if kind not in KINDS:
        raise ValueError(f"unknown kind {kind!r}; known: {', '.join(KINDS)}")
    return {p.name: p for p in SCHEMA if kind in p.kinds}


def get(name: str, kind: str | None = None) -> Param:
    """A parameter by name: the entry of ``kind``, else the one of the command line and the processes."""
    if kind is not None:
        found = for_kind(kind).get(name)
        if found is None:
            raise KeyError(f"no parameter {name!r} for a {kind} scenario")
        return found
    candidates = [p for p in SCHEMA if p.name == name]
    if not candidates:
        raise KeyError(f"no parameter {name!r}")
    return next((p for p in candidates if p.cli or p.env), candidates[0])


def default(name: str, kind: str | None = None) -> Any:
    param = get(name, kind)
    return param.default if kind is None else param.default_for(kind)


def defaults(kind: str) -> dict[str, Any]:
    """Every parameter of a scenario kind with its default (None: unset)."""
    return {name: p.default_for(kind) for name, p in for_kind(kind).items()}


def by_attr() -> dict[str, Param]:
    """The parameters of the command line and the processes, by the RunConfig attribute that holds them."""
    out: dict[str, Param] = {}
    for p in SCHEMA:
        if (p.cli or p.env) and p.attribute:
            out.setdefault(p.attribute, p)
    return out


def option(name: str, *decls: str, **overrides: Any) -> Any:
    """The ``typer.Option`` of a parameter: help, min and max from the schema (``overrides`` win)."""
    import typer

    param = get(name)
    text = param.help
    if param.choices:
        text = f"{text}: {' | '.join(param.choices)}"
    settings: dict[str, Any] = {"help": text}
    if param.unit and param.bounds:  # a duration: 30s, 2m, 1h or a number of its unit
        from taskbench.units import Duration

        settings.update(Duration(*param.bounds, param.unit).settings())
    elif param.bounds and param.type is not bool:
        settings["min"], settings["max"] = param.bounds
    settings.update(overrides)
    return typer.Option(*decls, **settings)


def settings_env(config: object, components: Iterable[str] = COMPONENTS, **given: Any) -> dict[str, str]:
    """The TASKBENCH_* environment of the API and/or worker processes of a run.

    Values come from ``given`` (per process: ``backend``, ``run_id``, ``redis_url``), else from the
    attribute of ``config`` (a RunConfig, or anything with some of its attributes, such as ``up``'s
    config) that holds the parameter; None and absent values are left out, so Settings' default holds.
    """
    wanted = set(components)
    env: dict[str, str] = {}
    for param in SCHEMA:
        if not param.env or not wanted & set(param.components):
            continue
        if param.name in given:
            value = given[param.name]
        elif param.attribute:
            value = getattr(config, param.attribute, None)
        else:
            value = None
        if value is None:
            continue
        env[f"TASKBENCH_{param.env}"] = str(value).lower() if isinstance(value, bool) else str(value)
    # the backend's library settings: RunConfig.options_json (a config without it: the library's defaults)
    options_json = getattr(config, "options_json", None)
    if callable(options_json) and given.get("backend") and wanted & {"api", "worker"}:
        options = options_json(given["backend"])
        if options:
            env["TASKBENCH_OPTIONS"] = options
    unknown = set(given) - {p.name for p in SCHEMA if p.env}
    if unknown:
        raise KeyError(f"not a parameter of the processes: {', '.join(sorted(unknown))}")
    env["PYTHONUNBUFFERED"] = "1"
    return env
