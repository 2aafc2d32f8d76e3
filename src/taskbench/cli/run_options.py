"""``taskbench run``'s options, one table in the panels of its help.

The command takes them as keyword arguments (:data:`SIGNATURE`); typer reads the signature, so the
table is the one place an option of ``run`` is declared. A parameter of the schema (:mod:`taskbench.params`)
takes its type, default, bounds and help from there.
"""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Annotated, Any

import typer

from taskbench import params
from taskbench.cli import load_options
from taskbench.cli import soak as soak_options
from taskbench.units import Duration

__all__ = ["PANELS", "SIGNATURE"]

BACKENDS = "Backends and workers"
TASK = "Your task"
LOAD = "Load"
FAULTS = "Faults and brokers"
TARGET = "Your own service (--target)"
SCENARIO = "Scenarios"
SOAK = "Soak (--soak)"
CLUSTER = "Many nodes (--nodes)"
OUTPUT = "Output"
PANELS = (BACKENDS, TASK, LOAD, FAULTS, TARGET, SCENARIO, SOAK, CLUSTER, OUTPUT)

_KEYWORD = inspect.Parameter.KEYWORD_ONLY


def _schema(name: str, panel: str, *decls: str, **overrides: Any) -> inspect.Parameter:
    """An option of the parameter schema: its type, bounds, help and default from there."""
    param = params.get(name)
    default = overrides.pop("default", param.default)
    kind: Any = param.type if default is not None else param.type | None
    option = params.option(name, *([param.flag, *decls] if decls else []), rich_help_panel=panel, **overrides)
    return inspect.Parameter(name, _KEYWORD, annotation=Annotated[kind, option], default=default)


def _own(name: str, kind: Any, default: Any, panel: str, *decls: str, **settings: Any) -> inspect.Parameter:
    """An option of ``run`` alone (not a parameter of the schema)."""
    option = typer.Option(*decls, rich_help_panel=panel, **settings)
    return inspect.Parameter(name, _KEYWORD, annotation=Annotated[kind, option], default=default)


def _typed(name: str, alias: Any, default: Any, panel: str) -> inspect.Parameter:
    """An option whose ``Annotated`` type another module declares (the load modes', the soak's)."""
    kind, option = alias.__origin__, alias.__metadata__[0]
    option = _in_panel(option, panel)
    return inspect.Parameter(name, _KEYWORD, annotation=Annotated[kind, option], default=default)


def _in_panel(option: Any, panel: str) -> Any:
    from copy import copy

    placed = copy(option)
    placed.rich_help_panel = panel
    return placed


_OPTIONS: tuple[inspect.Parameter, ...] = (
    _own("backends", str, "background,arq", BACKENDS, "--backends", "-b",
         help="comma-separated backends, or 'all' (`taskbench backends` lists them)"),
    _schema("workers", BACKENDS),
    _schema("concurrency", BACKENDS, "-c"),
    _own("option", list[str] | None, None, BACKENDS, "--option", "-o", metavar="LIB.KEY=VALUE",
         help="a library's own setting, e.g. saq.retries=3 or celery.pool=prefork; repeat for more. "
              "`taskbench backends` lists each library's settings, their bounds and defaults (the library's)"),
    _schema("enqueue_mode", BACKENDS),
    _schema("task_timeout", BACKENDS),
    _schema("enqueue_timeout", BACKENDS),
    _schema("idempotency", BACKENDS),
    _schema("restart_workers", BACKENDS),
    _schema("producer_threads", BACKENDS),
    _schema("versions", BACKENDS),
    _own("pin", str, "auto", BACKENDS, help="core placement: auto | off | 'api=0;workers=1;driver=1;redis=0'"),
    _schema("api_port", BACKENDS),
    _schema("http_metrics", BACKENDS),
    _schema("workload", TASK, "-w"),
    _schema("payload", TASK, "-p"),
    _own("with_packages", list[str] | None, None, TASK, "--with",
         help="with your own task: a package (a pip requirement) installed into every backend's environment, its "
              "locked versions held; repeat for more"),
    _own("task_paths", list[str] | None, None, TASK, "--path",
         help="with your own task: a folder importable in every backend's environment; repeat for more"),
    _schema("io_delay", TASK),
    _schema("cpu_iterations", TASK),
    _schema("model", LOAD, "-m"),
    _schema("users", LOAD, "-u"),
    _schema("rate", LOAD, "-r"),
    _schema("ramp", LOAD),
    _schema("requests", LOAD, "-n"),
    _schema("duration", LOAD, "-d"),
    _schema("driver_processes", LOAD),
    _schema("timeout", LOAD),
    _schema("warmup", LOAD),
    _typed("phases", load_options.Phases, None, LOAD),
    _typed("find_max_rate", load_options.FindMaxRate, False, LOAD),
    _typed("max_e2e_p95", load_options.MaxE2eP95, 1000.0, LOAD),
    _typed("max_backlog_growth", load_options.MaxBacklogGrowth, 5.0, LOAD),
    _typed("step_duration", load_options.StepDuration, 10.0, LOAD),
    _typed("start_rate", load_options.StartRate, 100.0, LOAD),
    _schema("drain_timeout", LOAD, default=None, help=(
        f"{params.get('drain_timeout').help} \\[default: {params.default('drain_timeout'):g}s, or longer while the "
        "backlog left at the load's end needs it at the pace the workers kept during the load: 1.5 x that + 30 s, "
        "and on while tasks still run at the drain's own pace, within an hour; a value given here is kept]")),
    _schema("drain_stall", LOAD),
    _schema("fault", FAULTS, "-f"),
    _schema("broker", FAULTS, default=None, help=(
        "broker for every backend (default: each backend's own, the first of its brokers in `taskbench backends`: "
        "redis, or postgres for the PostgreSQL queues)")),
    _schema("broker_url", FAULTS),
    _schema("redis_url", FAULTS),
    _schema("redis_fsync", FAULTS),
    _schema("postgres_durability", FAULTS),
    _schema("broker_delay", FAULTS),
    _own("target", str | None, None, TARGET, "--target", "-t",
         help="audit your own running service instead of the reference stack: http://127.0.0.1:PORT/path, sent "
              "POST with the task reference (docs/your-task.md)"),
    _own("id_header", bool, True, TARGET,
         help="send the task reference in the X-Taskbench-Task header (else only where --payload says {task_id})"),
    _own("backend", str | None, None, TARGET,
         help="your service's backend name: the queue library it uses (a name of `taskbench backends`), whose "
              "promise judges lost and duplicated tasks"),
    _own("worker_cmd", str | None, None, TARGET,
         help="your worker's command; taskbench starts it (in its own process group), kill-worker/pause-worker "
              "act on it"),
    _own("api_cmd", str | None, None, TARGET,
         help="your API's command; taskbench starts it (its own process group) and kill-api acts on it"),
    _own("worker_pid", int | None, None, TARGET,
         help="your running worker's pid, for --fault kill-worker (once, not restarted)"),
    _own("allow_fault_on_target", bool, False, TARGET,
         help="let --fault stall-broker/restart-broker act on the Redis of --broker-url"),
    _own("first_execution", float, 10.0, TARGET, **Duration(0, 600).settings(),
         help="stop the load when no execution reached the ledger within this many seconds"),
    _own("scenario", str | None, None, SCENARIO, "--scenario", "-s",
         help="run a scenario (a name from `taskbench scenarios`, or a .toml path) instead of the options; its "
              "file sets each case, so another option of run given with it is refused"),
    _own("cases", str | None, None, SCENARIO,
         help="with --scenario: only these cases: numbers, ranges or label words, e.g. 0,3,7-13,restart-broker"),
    _schema("profile", SCENARIO),
    _typed("soak", soak_options.Soak, None, SOAK),
    _typed("soak_share", soak_options.SoakShare, 50.0, SOAK),
    _typed("soak_memory_bound", soak_options.SoakMemoryBound, 20.0, SOAK),
    _typed("soak_latency_bound", soak_options.SoakLatencyBound, 50.0, SOAK),
    _own("nodes", int | None, None, CLUSTER, min=1, max=64,
         help="run one backend's API, each worker, Redis and NODES load drivers each in its own network "
              "namespace (root; docs/scale-out.md), the load split and merged"),
    _own("node_delay", float, 0.0, CLUSTER, **Duration(0, 1000, "ms").settings(),
         help="with --nodes: milliseconds of netem delay on each node's interface"),
    _own("output", Path, Path("results"), OUTPUT, help="folder for results and logs"),
    _own("keep", bool, False, OUTPUT, help="keep the run's Redis keys"),
    _schema("scrape_api", OUTPUT),
)

SIGNATURE = inspect.Signature(list(_OPTIONS), return_annotation=None)
