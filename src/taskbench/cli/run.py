"""``taskbench run``: benchmark backends from options, or run a scenario (``--scenario``)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from taskbench import params
from taskbench.cli import load_options
from taskbench.cli import soak as soak_options
from taskbench.cli._common import INTERRUPTED, backend_names, execute, fail, interrupt_on_signals, show_progress
from taskbench.cli.report import publish

if TYPE_CHECKING:
    from rich.console import Console

    from taskbench.harness.commands.runner import Runner
    from taskbench.harness.commands.target import TargetRunner
    from taskbench.results import Result
    from taskbench.scenarios.run import ScenarioRunner


def run(
    backends: Annotated[str, typer.Option(help="comma-separated backends, or 'all'")] = "background,arq",
    workload: Annotated[str, params.option("workload")] = params.default("workload"),
    payload: Annotated[str | None, params.option("payload")] = params.default("payload"),
    with_packages: Annotated[list[str] | None, typer.Option(
        "--with", help="with your own task: a package (a pip requirement) installed into every backend's "
                       "environment, its locked versions held; repeat for more")] = None,
    task_paths: Annotated[list[str] | None, typer.Option(
        "--path", help="with your own task: a folder importable in every backend's environment; repeat "
                       "for more")] = None,
    model: Annotated[str, params.option("model")] = params.default("model"),
    users: Annotated[int, params.option("users")] = params.default("users"),
    rate: Annotated[float | None, params.option("rate")] = params.default("rate"),
    ramp: Annotated[float, params.option("ramp")] = params.default("ramp"),
    requests: Annotated[int | None, params.option("requests")] = params.default("requests"),
    duration: Annotated[float | None, params.option("duration")] = params.default("duration"),
    driver_processes: Annotated[int, params.option("driver_processes")] = params.default("driver_processes"),
    workers: Annotated[int, params.option("workers")] = params.default("workers"),
    concurrency: Annotated[int, params.option("concurrency")] = params.default("concurrency"),
    enqueue_mode: Annotated[str, params.option("enqueue_mode")] = params.default("enqueue_mode"),
    io_delay: Annotated[float, params.option("io_delay")] = params.default("io_delay"),
    cpu_iterations: Annotated[int, params.option("cpu_iterations")] = params.default("cpu_iterations"),
    redis_url: Annotated[str | None, params.option("redis_url")] = params.default("redis_url"),
    broker: Annotated[str | None, params.option(
        "broker", help="broker for every backend (default: each backend's own, the first of its brokers in "
                       "`taskbench backends`: redis, or postgres for the PostgreSQL queues)")] = None,
    broker_url: Annotated[str | None, params.option("broker_url")] = params.default("broker_url"),
    redis_fsync: Annotated[str, params.option("redis_fsync")] = params.default("redis_fsync"),
    postgres_durability: Annotated[str, params.option("postgres_durability")] = params.default(
        "postgres_durability"),
    broker_delay: Annotated[float, params.option("broker_delay")] = params.default("broker_delay"),
    output: Annotated[Path, typer.Option(help="folder for results and logs")] = Path("results"),
    keep: Annotated[bool, typer.Option(help="keep the run's Redis keys")] = False,
    warmup: Annotated[int, params.option("warmup")] = params.default("warmup"),
    drain_timeout: Annotated[float | None, params.option(
        "drain_timeout", help="seconds to wait for tasks after the load [default: 120, or longer while the "
                              "backlog left at the load's end needs it at the pace the workers kept during the "
                              "load: 1.5 x that + 30 s, and on while tasks still run at the drain's own pace, "
                              "within an hour; a value given here is kept]")] = None,
    drain_stall: Annotated[float, params.option("drain_stall")] = params.default("drain_stall"),
    scrape_api: Annotated[float, params.option("scrape_api")] = params.default("scrape_api"),
    pin: Annotated[str, typer.Option(help="core placement: auto | off | 'api=0;workers=1;driver=1;redis=0'")] = "auto",
    api_port: Annotated[int | None, params.option("api_port")] = params.default("api_port"),
    timeout: Annotated[float, params.option("timeout")] = params.default("timeout"),
    http_metrics: Annotated[bool, params.option("http_metrics")] = params.default("http_metrics"),
    idempotency: Annotated[bool, params.option("idempotency")] = params.default("idempotency"),
    restart_workers: Annotated[bool | None, params.option("restart_workers")] = params.default("restart_workers"),
    task_timeout: Annotated[float, params.option("task_timeout")] = params.default("task_timeout"),
    enqueue_timeout: Annotated[float, params.option("enqueue_timeout")] = params.default("enqueue_timeout"),
    versions: Annotated[str, params.option("versions")] = params.default("versions"),
    fault: Annotated[str | None, params.option("fault")] = params.default("fault"),
    option: Annotated[list[str] | None, typer.Option(
        "--option", "-o", metavar="LIB.KEY=VALUE",
        help="a library's own setting, e.g. saq.retries=3 or celery.pool=prefork; repeat for more. "
             "`taskbench backends` lists each library's settings, their bounds and defaults (the library's)")] = None,
    producer_threads: Annotated[int, params.option("producer_threads")] = params.default("producer_threads"),
    scenario: Annotated[str | None, typer.Option(
        help="run a scenario (a name from `taskbench scenarios`, or a .toml path) instead of the options")] = None,
    cases: Annotated[str | None, typer.Option(
        help="with --scenario: only these cases: numbers, ranges or label words, e.g. 0,3,7-13,restart-broker",
    )] = None,
    profile: Annotated[str | None, params.option("profile")] = params.default("profile"),
    target: Annotated[str | None, typer.Option(
        help="audit your own running service instead of the reference stack: http://127.0.0.1:PORT/path, "
             "sent POST with the task reference (README: Audit your own service)")] = None,
    id_header: Annotated[bool, typer.Option(
        help="with --target: send the task reference in the X-Taskbench-Task header (else only where "
             "--payload says {task_id})")] = True,
    library: Annotated[str | None, typer.Option(
        help="with --target: the queue library your service uses (a name of `taskbench backends`): its "
             "promise judges lost and duplicated tasks")] = None,
    worker_cmd: Annotated[str | None, typer.Option(
        help="with --target: your worker's command; taskbench starts it (in its own process group), "
             "kill-worker/pause-worker act on it")] = None,
    api_cmd: Annotated[str | None, typer.Option(
        help="with --target: your API's command; taskbench starts it (its own process group) and kill-api "
             "acts on it")] = None,
    worker_pid: Annotated[int | None, typer.Option(
        help="with --target: your running worker's pid, for --fault kill-worker (once, not restarted)")] = None,
    allow_fault_on_target: Annotated[bool, typer.Option(
        help="with --target: let --fault stall-broker/restart-broker act on the Redis of --broker-url")] = False,
    phases: load_options.Phases = None,
    find_max_rate: load_options.FindMaxRate = False,
    max_e2e_p95: load_options.MaxE2eP95 = 1000.0,
    max_backlog_growth: load_options.MaxBacklogGrowth = 5.0,
    step_duration: load_options.StepDuration = 10.0,
    start_rate: load_options.StartRate = 100.0,
    first_execution: Annotated[float, typer.Option(
        help="with --target: stop the load when no execution reached the ledger within this many seconds")] = 10.0,
    nodes: Annotated[int | None, typer.Option(
        min=1, max=64, help="run one backend's API, each worker, Redis and NODES load drivers each in its own "
                            "network namespace (root; docs/scale-out.md), the load split and merged")] = None,
    node_delay: Annotated[float, typer.Option(
        min=0, max=1000, help="with --nodes: milliseconds of netem delay on each node's interface")] = 0.0,
    soak: soak_options.Soak = None,
    soak_fraction: soak_options.SoakFraction = 0.5,
    soak_memory_bound: soak_options.SoakMemoryBound = 20.0,
    soak_latency_bound: soak_options.SoakLatencyBound = 0.5,
) -> None:
    """Benchmark backends: start everything, load, drain, audit the ledger, print the table."""
    from rich.console import Console
    from rich.markup import escape

    if soak is not None and (target is not None or scenario is not None):
        fail("--soak applies to the backends' own stacks: leave out --target and --scenario")
    if target is not None:
        from taskbench.cli.target import run_target

        run_target(target, load={"model": model, "users": users, "rate": rate, "ramp": ramp, "requests": requests,
                                 "duration": duration, "driver_processes": driver_processes, "timeout": timeout},
                   redis_url=redis_url, payload=payload, id_header=id_header, library=library,
                   enqueue_mode=enqueue_mode, worker_cmd=worker_cmd, worker_pid=worker_pid,
                   api_cmd=api_cmd, fault=fault,
                   broker_url=broker_url, allow_fault_on_target=allow_fault_on_target, output=output,
                   drain_timeout=params.default("drain_timeout") if drain_timeout is None else drain_timeout,
                   drain_stall=drain_stall, first_execution=first_execution,
                   keep=keep, options=option or [])
        return
    if any((library, worker_cmd, api_cmd, worker_pid is not None, allow_fault_on_target, not id_header)):
        fail("--library, --worker-cmd, --api-cmd, --worker-pid, --allow-fault-on-target and --no-id-header apply to "
             "--target: give --target URL as well")
    if scenario is not None:
        run_scenario(scenario, cases, output, redis_url, profile)
        return
    if profile is not None:
        fail("--profile applies to a scenario: give --scenario NAME as well")

    from taskbench.backends import options as library_options
    from taskbench.harness.commands.runner import Runner
    from taskbench.harness.config import Placement, RunConfig, load_spec
    from taskbench.harness.faults.kinds import Fault, delay_of
    from taskbench.report.table import render

    console = Console(stderr=True)
    try:  # the options' ranges and choices are checked once, by load_spec and RunConfig, from the schema
        delay = delay_of(fault) if fault else None
        if delay is not None:  # --fault delay-broker=Xms is --broker-delay X: the delay lasts the whole case
            fault, broker_delay = None, delay
        options, soak_spec = soak_options.soak_load(
            soak, {"model": model, "users": users, "rate": rate, "ramp": ramp, "requests": requests,
                   "duration": duration, "driver_processes": driver_processes, "timeout": timeout},
            fraction=soak_fraction, memory_bound=soak_memory_bound, latency_bound=soak_latency_bound)
        load = load_spec(options)
        load_phases, rate_search = load_options.load_modes(
            phases, find_max_rate, {"model": model, "rate": rate, "requests": requests, "duration": duration},
            max_e2e_p95=max_e2e_p95, max_backlog_growth=max_backlog_growth, step_duration=step_duration,
            start_rate=start_rate)
        config = RunConfig(
            backends=tuple(backend_names(backends, broker)), workload=workload, load=load, workers=workers,
            phases=load_phases, rate_search=rate_search,
            concurrency=concurrency, enqueue_mode=enqueue_mode,  # type: ignore[arg-type]
            io_delay=io_delay, cpu_iterations=cpu_iterations, redis_url=redis_url,
            broker=broker, broker_url=broker_url, redis_fsync=redis_fsync, broker_delay=broker_delay,
            postgres_durability=postgres_durability,
            output=output, keep=keep, warmup=warmup, drain_stall=drain_stall,
            drain_timeout=params.default("drain_timeout") if drain_timeout is None else drain_timeout,
            drain_follows_backlog=drain_timeout is None,
            api_port=api_port, placement=Placement.parse(pin), http_metrics=http_metrics,
            idempotency=idempotency, task_timeout=task_timeout, enqueue_timeout=enqueue_timeout,
            fault=Fault.parse(fault) if fault else None, restart_workers=restart_workers,
            options=library_options.parse(option or []),
            producer_threads=producer_threads, payload=payload, with_packages=tuple(with_packages or ()),
            task_paths=tuple(task_paths or ()), soak=soak_spec, scrape_api=scrape_api, versions=versions,
        )
    except ValueError as exc:
        fail(str(exc))
    if soak_spec is not None and (config.phases or config.rate_search):
        fail("--soak, --phases and --find-max-rate each decide the load: give one of them")
    if soak_spec is not None and soak_spec.rate_source == soak_options.SEARCHED:
        from taskbench.harness import HarnessError

        show_progress(console)
        interrupt_on_signals()
        try:
            config = soak_options.at_sustainable_rate(config, say=lambda text: console.print(f"[dim]{escape(text)}[/]"))
        except (ValueError, HarnessError) as exc:
            fail(str(exc))
        except KeyboardInterrupt:
            fail(INTERRUPTED, code=130)

    if nodes is not None:  # the pods of a cluster run, as processes in network namespaces
        from taskbench.cli.scaleout import run_nodes

        run_nodes(config, nodes, node_delay, console, output)
        return
    runner = Runner(config, say=lambda text: console.print(f"[dim]{escape(text)}[/]"))
    _finish(runner, console, render, output)


def run_scenario(name: str, cases: str | None, output: Path, redis_url: str | None,
                 profile: str | None = None) -> None:
    from rich.console import Console
    from rich.markup import escape

    from taskbench.report.scenario import render
    from taskbench.scenarios import ScenarioError, resolve, select
    from taskbench.scenarios.run import ScenarioRunner

    console = Console(stderr=True)
    try:
        found = resolve(name, profile)
        selected = None
        if cases:
            selected = select(found, cases)
        runner = ScenarioRunner(found, output=output, redis_url=redis_url, cases=selected,
                                say=lambda text: console.print(f"[dim]{escape(text)}[/]"))
    except (ScenarioError, ValueError) as exc:
        fail(str(exc))

    scale = f", profile {found.profile}" if found.profile else ""
    console.print(f"[dim]{escape(f'scenario {found.name}: {len(runner.cases)} case(s) from {found.path}{scale}')}[/]")
    _finish(runner, console, render, output)


def _finish(runner: Runner | ScenarioRunner | TargetRunner, console: Console, render: Callable[[Result, Console], None],
            output: Path) -> None:
    """Run with live progress, print the table, write report.html and the index, exit 1 unless it passed."""
    from rich.console import Console

    show_progress(console)
    result = execute(runner, console)
    render(result, Console())
    console.print(f"result: {runner.result_path()}", markup=False)  # --output is the user's: a "[" is text
    publish(result, runner.result_path(), output, lambda text: console.print(text, markup=False))
    if not result.passed():
        raise typer.Exit(1)
