"""A run's parameters: frozen keyword-only dataclasses, validated on construction."""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from taskbench import params
from taskbench.backends.options import LibraryOptions
from taskbench.driver import LoadSpec
from taskbench.harness.brokers.base import redact
from taskbench.harness.faults.kinds import Fault
from taskbench.harness.load import phases as load_phases
from taskbench.harness.load.search import Objective
from taskbench.harness.processes.cgroups import Limit
from taskbench.harness.soak.plan import SoakSpec
from taskbench.messages import WORKLOADS
from taskbench.settings import EnqueueMode

ROLES = ("api", "workers", "driver", "redis")
#: the shortest interval of --scrape-api: a scrape a tenth of a second at most, not a load of its own
MIN_SCRAPE = 0.1


def check_brokers(names: Iterable[str], broker: str | None, broker_url: str | None) -> dict[str, str]:
    """Backend -> the broker it runs on: ``broker`` for every one (each must run on it), else each one's
    own default (the first it names). A ValueError worded for the command line when they do not fit."""
    from taskbench import backends

    if broker is not None:
        params.get("broker").check(broker)  # before the backends' brokers
    found = {}
    for name in names:
        meta = backends.info(name)
        if broker is not None and broker not in meta.brokers:
            raise ValueError(f"backend {name!r} does not run on {broker!r}; its brokers: {', '.join(meta.brokers)}")
        found[name] = broker or meta.brokers[0]
    if broker_url and len(set(found.values())) > 1:
        raise ValueError("--broker-url names one broker, and these backends run on "
                         f"{' and '.join(sorted(set(found.values())))}: give --broker too")
    return found


@dataclass(frozen=True, kw_only=True)
class Placement:
    """Which cores each component may run on (None: anywhere)."""

    api: list[int] | None = None
    workers: list[int] | None = None
    driver: list[int] | None = None
    redis: list[int] | None = None

    @classmethod
    def parse(cls, text: str) -> Placement:
        """``auto``, ``off``, or ``api=0;workers=1;driver=1;redis=0,1``."""
        text = text.strip()
        if text == "off":
            return cls()
        if text == "auto":
            cpus = sorted(os.sched_getaffinity(0))
            if len(cpus) < 2:
                return cls()
            # The API gets a core of its own; the driver and the workers share the other one.
            return cls(api=[cpus[0]], workers=cpus[1:], driver=cpus[1:])
        values: dict[str, list[int]] = {}
        usable = set(os.sched_getaffinity(0))
        for part in filter(None, (p.strip() for p in text.split(";"))):
            role, sep, cores = part.partition("=")
            role = role.strip()
            if not sep or role not in ROLES:
                raise ValueError(f"--pin: expected ROLE=CPUS with ROLE in {ROLES}, got {part!r}")
            try:
                listed = [int(c) for c in cores.split(",") if c.strip()]
            except ValueError:
                raise ValueError(f"--pin: cores must be integers, got {cores!r}") from None
            if not listed or not set(listed) <= usable:
                raise ValueError(f"--pin: {role} cores {listed} not in usable cores {sorted(usable)}")
            values[role] = listed
        return cls(**values)

    def to_dict(self) -> dict[str, Any]:
        return {role: getattr(self, role) for role in ROLES}


@dataclass(frozen=True, kw_only=True)
class RunConfig:
    backends: tuple[str, ...] = ("background", "arq")
    workload: str = "io/simple"
    load: LoadSpec = field(default_factory=lambda: LoadSpec(users=100, requests=10_000))
    workers: int = 1
    concurrency: int = 10
    enqueue_mode: EnqueueMode = "awaited"
    io_delay: float = 0.0
    cpu_iterations: int = 200_000
    threads: int = 3
    processes: int = 3
    redis_url: str | None = None
    #: a name of taskbench.brokers.BROKERS; None: each backend on its own default broker (the first it names)
    broker: str | None = None
    broker_url: str | None = None
    broker_delay: float | None = None  # ms each way through the delay proxy (None: the broker is reached directly)
    redis_fsync: str = "always"  # the embedded broker Redis's AOF policy; "none": no persistence
    postgres_durability: str = "fsync"  # the private broker PostgreSQL's fsync/synchronous_commit
    output: Path = Path("results")
    keep: bool = False
    warmup: int = 200
    drain_timeout: float = 120.0
    #: ``drain_timeout`` grows with the backlog left at the load's end (``taskbench run`` without
    #: --drain-timeout), as it does for phases: a slow worker's backlog is not cut off as lost
    drain_follows_backlog: bool = False
    #: the drain stops once no task ran for this long (at least 2 × task_timeout + 10 s: redeliveries)
    drain_stall: float = 60.0
    late_grace: float = 2.0
    scrape_api: float = 0.0  # s between two scrapes of the API's /metrics through the load (0: none)
    startup_timeout: float = 60.0
    stop_timeout: float = 10.0
    task_timeout: float = 60.0
    enqueue_timeout: float = 5.0
    #: the libraries' own settings: package -> {key: value}, each checked by the package's Options model
    #: (``--option LIB.KEY=VALUE``; a key left out: the library's default)
    options: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    producer_threads: int = 32
    #: the backends' library versions: "lock" (each backend's environment from uv.lock) or a pinned set
    #: of a seed's (pinned/<name>/, the backends it names only)
    versions: str = "lock"
    api_port: int | None = None
    http_metrics: bool = True
    idempotency: bool = True
    #: a worker that exits on its own is started again (a supervisor); None: on with a fault, off without
    restart_workers: bool | None = None
    placement: Placement = field(default_factory=Placement)
    # per component ("api", "workers"): cgroup limits applied once the stack is ready
    limits: dict[str, Limit] = field(default_factory=dict)
    # killed mid-load and restarted: the audit and the ledger's times say what it cost
    fault: Fault | None = None
    #: a user's task (``workload`` = module:callable): its payload template file, the packages installed
    #: into every backend's environment (``--with``) and the folders importable there (``--path``)
    payload: str | None = None
    with_packages: tuple[str, ...] = ()
    task_paths: tuple[str, ...] = ()
    #: ``--phases``: the load as phases of the open model (its users, processes and timeout kept); the
    #: load's own rate and bounds give way to the phases' (``load`` holds the schedule once built)
    phases: tuple[load_phases.Phase, ...] = ()
    #: ``--find-max-rate``: the objective of the search for the highest sustainable rate (None: no search)
    rate_search: Objective | None = None
    #: ``--soak``: the load is one open-model stretch at ``load.rate`` for ``soak.duration_s``, sampled and
    #: judged for drift (taskbench.harness.soak)
    soak: SoakSpec | None = None

    def __post_init__(self) -> None:
        if self.workload not in WORKLOADS:
            self._check_user_task()
        elif self.payload is not None or self.with_packages or self.task_paths:
            raise ValueError("--payload, --with and --path go with your own task: --workload module:callable")
        if not self.backends:
            raise ValueError("no backend selected")
        check_brokers(self.backends, self.broker, self.broker_url)
        self._check_load_modes()
        checked = params.by_attr()  # the ranges of the schema, worded for the command line
        for item in fields(self):
            value = getattr(self, item.name)
            if item.name in checked and value is not None:
                checked[item.name].check(value)
        self._check_options()
        self._check_versions()
        if 0 < self.scrape_api < MIN_SCRAPE:
            raise ValueError(f"--scrape-api {self.scrape_api:g}: scrape at most every {MIN_SCRAPE:g} s "
                             "(0 turns the scrape off)")

    def _check_versions(self) -> None:
        if self.versions == "lock":
            return
        from taskbench.harness.processes.envs import pinned_backends, pinned_max_concurrency, pinned_requires

        held = pinned_backends(self.versions)
        others = [name for name in self.backends if name not in held]
        if others:
            raise ValueError(f"--versions {self.versions} holds {', '.join(held)} at a seed's versions "
                             f"(pinned/{self.versions}/pyproject.toml), not {', '.join(others)}")
        for name, required in pinned_requires(self.versions).items():
            if name not in self.backends:
                continue
            options = self.library_options(name)
            unknown = [key for key in required if key not in type(options).model_fields]
            if unknown:
                raise ValueError(f"pinned/{self.versions}/pyproject.toml requires {', '.join(unknown)} of {name}: "
                                 "no such setting")
            wrong = {key: value for key, value in required.items() if getattr(options, key) != value}
            if wrong:
                from taskbench import backends

                library = backends.info(name).extra
                given = ", ".join(f"--option {library}.{key}={value}" for key, value in wrong.items())
                raise ValueError(f"{name} on --versions {self.versions} runs with {given} "
                                 f"(pinned/{self.versions}/pyproject.toml)")
        for name, most in pinned_max_concurrency(self.versions).items():
            if name in self.backends and self.concurrency > most:
                raise ValueError(f"--concurrency {self.concurrency}: {name} on --versions {self.versions} runs at most "
                                 f"{most} at a time (pinned/{self.versions}/pyproject.toml)")

    def _check_load_modes(self) -> None:
        """``--phases`` and ``--find-max-rate`` each decide the load: one at a time, without a fault for the
        search (its steps must measure the stack, not a fault's cost); the phases become the schedule."""
        if self.rate_search is not None and self.phases:
            raise ValueError("--phases and --find-max-rate each decide the load: give one of them")
        if self.rate_search is not None and self.fault is not None:
            raise ValueError("--find-max-rate measures the stack as it is: leave out --fault (or use --phases with "
                             "pause-workers or stall-broker)")
        if self.phases and not self.load.schedule:
            load = LoadSpec(model="open", users=self.load.users, processes=self.load.processes,
                            timeout=self.load.timeout, id_prefix=self.load.id_prefix,
                            schedule=load_phases.stages(self.phases))
            object.__setattr__(self, "load", load)

    def _check_user_task(self) -> None:
        from taskbench import payload, user_task

        if ":" not in self.workload:
            raise ValueError(f"unknown workload {self.workload!r}; known: {', '.join(WORKLOADS)}, or your own "
                             "task as module:callable or path/to/file.py:callable")
        user_task.split_spec(self.workload)
        if user_task.is_file_spec(self.workload):
            target = Path(user_task.split_spec(self.workload)[0])
            if not target.is_file():
                raise ValueError(f"--workload {self.workload}: no such file: {target}")
        for folder in self.task_paths:
            if not Path(folder).is_dir():
                raise ValueError(f"--path {folder}: not a folder")
        if self.payload is not None:
            payload.read(self.payload)  # PayloadError, a ValueError: one line

    @property
    def user_task(self) -> bool:
        """Whether the run's workload is the user's own callable (module:callable)."""
        return self.workload not in WORKLOADS

    @property
    def route_workload(self) -> str:
        """The workload part of the API's route: the built-in name, or ``user/task``."""
        from taskbench.messages import USER_TASK

        return USER_TASK if self.user_task else self.workload

    @property
    def task(self) -> str | None:
        """The user's callable as the processes import it (a file's path made absolute), or None."""
        if not self.user_task:
            return None
        from taskbench import user_task

        target, attr = user_task.split_spec(self.workload)
        if user_task.is_file_spec(self.workload):
            target = str(Path(target).resolve())
        return f"{target}:{attr}"

    @property
    def task_path(self) -> str | None:
        """``--path`` folders, absolute, joined by ``os.pathsep`` (None: none given)."""
        if not self.task_paths:
            return None
        return os.pathsep.join(str(Path(folder).resolve()) for folder in self.task_paths)

    def payload_template(self) -> dict[str, Any]:
        """The payload every call of the user's task gets, before its id is filled in."""
        from taskbench import payload

        return payload.read(self.payload) if self.payload is not None else dict(payload.DEFAULT)

    def library_options(self, backend: str) -> LibraryOptions:
        """``backend``'s library settings as the run gives them, the library's defaults for the rest."""
        from taskbench import backends

        meta = backends.info(backend)
        return meta.library_options(self.options.get(meta.extra))

    def promise_settings(self, backend: str) -> dict[str, Any]:
        """The run's values of the library settings that change ``backend``'s promise."""
        options = self.library_options(backend)
        return {name: getattr(options, name) for name in options.promise_fields}

    def quick_recovery(self) -> dict[str, dict[str, Any]]:
        """``options`` with each backend's ``quick_recovery`` values under the ones given."""
        from taskbench import backends

        out = {library: dict(values) for library, values in self.options.items()}
        for name in self.backends:
            meta = backends.info(name)
            out[meta.extra] = {**meta.options.quick_recovery, **out.get(meta.extra, {})}
        return {library: values for library, values in out.items() if values}

    def options_json(self, backend: str) -> str | None:
        """``TASKBENCH_OPTIONS`` of ``backend``'s processes: its library's settings that differ from the
        defaults (None: none)."""
        changed = self.library_options(backend).changed()
        return json.dumps(changed, sort_keys=True) if changed else None

    def _check_options(self) -> None:
        from taskbench import backends
        from taskbench.backends import options as library_options

        known = backends.libraries()
        for library, values in self.options.items():
            if library not in known:
                listed = ", ".join(sorted(known)) or "none"
                raise ValueError(f"--option {library}.*: no library {library!r} takes settings; those that do: "
                                 f"{listed}")
            problem = library_options.problem(library, known[library], values)
            if problem:
                raise library_options.OptionError(f"--option {problem}")

    def redelivery_wait(self, backend: str) -> float:
        """Seconds before a dead worker's task of ``backend`` comes back: the task timeout, or the
        library setting that sets it instead (``Delivery.after`` under the run's options)."""
        from taskbench import backends

        after = backends.info(backend).delivery_on(self.broker_for(backend), self.promise_settings(backend)).after
        return max(self.task_timeout, after or 0.0)

    def broker_for(self, backend: str) -> str:
        """The broker ``backend``'s case runs on: ``--broker``, else the backend's default."""
        from taskbench import backends

        return self.broker or backends.info(backend).brokers[0]

    @property
    def brokers(self) -> dict[str, str]:
        """Backend -> the broker its case runs on."""
        return {name: self.broker_for(name) for name in self.backends}

    @property
    def supervised(self) -> bool:
        """Whether exited workers are started again: ``restart_workers``, by default only under a fault
        (the seed's compose restarts its workers, ``restart: on-failure``; a fault run measures the
        deployment, a plain run should fail loudly on a worker that dies)."""
        return self.fault is not None if self.restart_workers is None else self.restart_workers

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["load"] = load_dict(self.load)
        data["output"] = str(self.output)
        data["backends"] = list(self.backends)
        if self.redis_url:
            data["redis_url"] = redact(self.redis_url)
        if self.broker_url:
            data["broker_url"] = redact(self.broker_url)
        return data


def load_dict(spec: LoadSpec) -> dict[str, Any]:
    """A run's load as its result's config holds it: without ``share``, a driver process's part of the
    load (the run's is all of it)."""
    data = asdict(spec)
    data.pop("share")
    return data


def load_spec(values: Mapping[str, Any]) -> LoadSpec:
    """The load of a run from its parameters as the schema names them (``model``, ``users``, ``rate``,
    ``ramp``, ``pace``, ``requests``, ``duration``, ``driver_processes``, ``timeout``), each checked
    against the schema; a missing or None one takes the schema's default. With neither ``requests``
    nor ``duration``, 10000 requests (``run`` without either option). A ``rate`` makes the closed model,
    the default, the open one (a closed loop has no rate: ``--rate`` alone would be ignored otherwise).
    """
    names = ("model", "users", "rate", "ramp", "pace", "keepalive", "requests", "duration", "driver_processes",
             "timeout")
    got: dict[str, Any] = {name: values.get(name) for name in names}
    for name, value in got.items():
        if value is None:
            got[name] = params.default(name)
        else:
            params.get(name).check(value)
    if got["requests"] is None and got["duration"] is None:
        got["requests"] = 10_000
    if got["rate"] is not None and got["model"] == "closed":  # a rate is arrivals a second: the open model's
        got["model"] = "open"
    return LoadSpec(model=got["model"], users=got["users"], rate=got["rate"], ramp_per_s=got["ramp"],
                    pace=got["pace"], keepalive=got["keepalive"], requests=got["requests"], duration=got["duration"],
                    processes=got["driver_processes"], timeout=got["timeout"])
