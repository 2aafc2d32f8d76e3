"""``taskbench run``: benchmark backends from options, or run a scenario (``--scenario``)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

import typer

from taskbench import params
from taskbench.cli import load_options
from taskbench.cli import soak as soak_options
from taskbench.cli._common import (
    INTERRUPTED,
    backend_names,
    execute,
    fail,
    interrupt_on_signals,
    say_on,
    show_progress,
)
from taskbench.cli.report import publish
from taskbench.cli.run_options import SIGNATURE

if TYPE_CHECKING:
    from rich.console import Console

    from taskbench.harness.commands.run import Runner
    from taskbench.harness.commands.target import TargetRunner
    from taskbench.harness.config import RunConfig
    from taskbench.results import Result
    from taskbench.scenarios.run import ScenarioRunner


def run(**given: Any) -> None:
    """Benchmark backends: start everything, load, drain, audit the ledger, print the table."""
    from rich.console import Console

    a = SimpleNamespace(**given)
    if a.soak is not None and (a.target is not None or a.scenario is not None):
        fail("--soak applies to the backends' own stacks: leave out --target and --scenario")
    if a.target is not None:
        _run_target(a)
        return
    if a.backend is not None:
        fail("--backend names the backend of your own service, with --target URL; the backends to benchmark are "
             "--backends (-b)")
    if any((a.worker_cmd, a.api_cmd, a.worker_pid is not None, a.allow_fault_on_target, not a.id_header)):
        fail("--worker-cmd, --api-cmd, --worker-pid, --allow-fault-on-target and --no-id-header apply to "
             "--target: give --target URL as well")
    if a.scenario is not None:
        ignored = ignored_by_scenario(given)
        if ignored:
            fail(f"--scenario runs the cases its file sets, so {', '.join(ignored)} would be ignored: set them in a "
                 "copy of the file (`taskbench scenarios` names the files), or pick one of its --profile tables")
        run_scenario(a.scenario, a.cases, a.output, a.redis_url, a.profile)
        return
    if a.profile is not None:
        fail("--profile applies to a scenario: give --scenario NAME as well")

    from taskbench.harness.commands.run import Runner
    from taskbench.report.table import render

    console = Console(stderr=True)
    config = _config(a)
    if config.soak is not None and config.soak.rate_source == soak_options.SEARCHED:
        config = _at_sustainable_rate(config, console)
    if a.nodes is not None:  # the pods of a cluster run, as processes in network namespaces
        from taskbench.cli.scaleout import run_nodes

        run_nodes(config, a.nodes, a.node_delay, console, a.output)
        return
    runner = Runner(config, say=say_on(console))
    _finish(runner, console, render, a.output)


run.__signature__ = SIGNATURE  # type: ignore[attr-defined]  # typer reads the options from it


def _load(a: SimpleNamespace) -> dict[str, Any]:
    return {"model": a.model, "users": a.users, "rate": a.rate, "ramp": a.ramp, "requests": a.requests,
            "duration": a.duration, "driver_processes": a.driver_processes, "timeout": a.timeout}


def _drain_timeout(a: SimpleNamespace) -> float:
    return float(params.default("drain_timeout") if a.drain_timeout is None else a.drain_timeout)


def _run_target(a: SimpleNamespace) -> None:
    from taskbench.cli.target import run_target

    run_target(a.target, load=_load(a), redis_url=a.redis_url, payload=a.payload, id_header=a.id_header,
               backend=a.backend, enqueue_mode=a.enqueue_mode, worker_cmd=a.worker_cmd, worker_pid=a.worker_pid,
               api_cmd=a.api_cmd, fault=a.fault, broker_url=a.broker_url,
               allow_fault_on_target=a.allow_fault_on_target, output=a.output, drain_timeout=_drain_timeout(a),
               drain_stall=a.drain_stall, first_execution=a.first_execution, keep=a.keep, options=a.option or [])


def _config(a: SimpleNamespace) -> RunConfig:
    """The run's config from the options; every mistake one line (the ranges and choices are checked once,
    by load_spec and RunConfig, from the schema)."""
    from taskbench.backends import options as library_options
    from taskbench.harness.config import Placement, RunConfig, load_spec
    from taskbench.harness.faults.kinds import Fault, delay_of

    try:
        fault, broker_delay = a.fault, a.broker_delay
        delay = delay_of(fault) if fault else None
        if delay is not None:  # --fault delay-broker=Xms is --broker-delay X: the delay lasts the whole case
            fault, broker_delay = None, delay
        options, soak_spec = soak_options.soak_load(
            a.soak, _load(a), share=a.soak_share, memory_bound=a.soak_memory_bound,
            latency_bound=a.soak_latency_bound)
        load_phases, rate_search = load_options.load_modes(
            a.phases, a.find_max_rate, {"model": a.model, "rate": a.rate, "requests": a.requests,
                                        "duration": a.duration},
            max_e2e_p95=a.max_e2e_p95, max_backlog_growth=a.max_backlog_growth, step_duration=a.step_duration,
            start_rate=a.start_rate)
        config = RunConfig(
            backends=tuple(backend_names(a.backends, a.broker)), workload=a.workload, load=load_spec(options),
            workers=a.workers, phases=load_phases, rate_search=rate_search, concurrency=a.concurrency,
            enqueue_mode=a.enqueue_mode, io_delay=a.io_delay, cpu_iterations=a.cpu_iterations,
            redis_url=a.redis_url, broker=a.broker, broker_url=a.broker_url, redis_fsync=a.redis_fsync,
            broker_delay=broker_delay, postgres_durability=a.postgres_durability, output=a.output, keep=a.keep,
            warmup=a.warmup, drain_stall=a.drain_stall, drain_timeout=_drain_timeout(a),
            drain_follows_backlog=a.drain_timeout is None, api_port=a.api_port, placement=Placement.parse(a.pin),
            http_metrics=a.http_metrics, idempotency=a.idempotency, task_timeout=a.task_timeout,
            enqueue_timeout=a.enqueue_timeout, fault=Fault.parse(fault) if fault else None,
            restart_workers=a.restart_workers, options=library_options.parse(a.option or []),
            producer_threads=a.producer_threads, payload=a.payload, with_packages=tuple(a.with_packages or ()),
            task_paths=tuple(a.task_paths or ()), soak=soak_spec, scrape_api=a.scrape_api, versions=a.versions,
        )
    except ValueError as exc:
        fail(str(exc))
    if soak_spec is not None and (config.phases or config.rate_search):
        fail("--soak, --phases and --find-max-rate each decide the load: give one of them")
    return config


def _at_sustainable_rate(config: RunConfig, console: Console) -> RunConfig:
    """A soak with no --rate: its rate, a share of the sustainable one, searched first."""

    from taskbench.harness import HarnessError

    show_progress(console)
    interrupt_on_signals()
    try:
        return soak_options.at_sustainable_rate(config, say=say_on(console))
    except (ValueError, HarnessError) as exc:
        fail(str(exc))
    except KeyboardInterrupt:
        fail(INTERRUPTED, code=130)


#: the options a scenario run reads; every other one is its file's to set, per case
SCENARIO_OPTIONS = frozenset({"scenario", "cases", "profile", "output", "redis_url"})


def ignored_by_scenario(given: dict[str, Any]) -> list[str]:
    """The options given away from their defaults that a scenario run would not read, as flags."""
    return sorted(f"--{name.replace('_', '-')}" for name, param in SIGNATURE.parameters.items()
                  if name not in SCENARIO_OPTIONS and name in given and given[name] != param.default)


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
                                say=say_on(console))
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
