"""``taskbench run``: benchmark backends from options, or run a scenario (``--scenario``)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from taskbench.cli._common import backend_names, execute, fail, passed


def run(
    backends: Annotated[str, typer.Option(help="comma-separated backends, or 'all'")] = "background,arq",
    workload: Annotated[str, typer.Option(help="io/simple, io/sync, io/thread, cpu/simple, cpu/process")] = "io/simple",
    model: Annotated[str, typer.Option(help="load model: closed | open | ramp")] = "closed",
    users: Annotated[int, typer.Option(min=1, max=10_000, help="concurrent users (open: max connections)")] = 100,
    rate: Annotated[float | None, typer.Option(min=0.001, help="open model: requests per second")] = None,
    ramp: Annotated[float, typer.Option(min=0.001, help="ramp model: users added per second")] = 10.0,
    requests: Annotated[int | None, typer.Option(min=1, max=10_000_000, help="requests per case")] = None,
    duration: Annotated[float | None, typer.Option(min=0.1, max=3600, help="seconds per case")] = None,
    driver_processes: Annotated[int, typer.Option(min=1, max=64, help="load generator processes")] = 1,
    workers: Annotated[int, typer.Option(min=1, max=64, help="worker processes per backend")] = 1,
    concurrency: Annotated[int, typer.Option(min=1, max=10_000, help="tasks at once per worker")] = 10,
    enqueue_mode: Annotated[str, typer.Option(help="awaited | after-response")] = "awaited",
    io_delay: Annotated[float, typer.Option(min=0, max=60, help="simulated I/O seconds per task")] = 0.0,
    cpu_iterations: Annotated[
        int, typer.Option(min=0, max=100_000_000, help="CPU work per cpu/* task")
    ] = 200_000,
    redis_url: Annotated[str | None, typer.Option(help="use this Redis instead of an embedded one")] = None,
    broker: Annotated[str, typer.Option(help="redis | rabbitmq | nats, where the backend supports it")] = "redis",
    broker_url: Annotated[str | None, typer.Option(help="RabbitMQ/NATS URL (default: local server)")] = None,
    output: Annotated[Path, typer.Option(help="folder for results and logs")] = Path("results"),
    keep: Annotated[bool, typer.Option(help="keep the run's Redis keys")] = False,
    warmup: Annotated[int, typer.Option(min=0, max=100_000, help="warm-up requests per case")] = 200,
    drain_timeout: Annotated[
        float, typer.Option(min=1, max=3600, help="seconds to wait for tasks after the load")
    ] = 120.0,
    pin: Annotated[str, typer.Option(help="core placement: auto | off | 'api=0;workers=1;driver=1;redis=0'")] = "auto",
    api_port: Annotated[int | None, typer.Option(min=1, max=65535, help="API port (default: a free one)")] = None,
    timeout: Annotated[float, typer.Option(min=0.1, max=600, help="per-request timeout, seconds")] = 30.0,
    http_metrics: Annotated[bool, typer.Option(help="the API's HTTP request metrics middleware")] = True,
    task_timeout: Annotated[float, typer.Option(
        min=1, max=86_400, help="longest a task may run; also when a dead worker's task is retried")] = 60.0,
    fault: Annotated[str | None, typer.Option(
        help="kill and restart a component mid-load: kill-worker@SECONDS | kill-api@SECONDS")] = None,
    scenario: Annotated[str | None, typer.Option(
        help="run a scenario (a name from `taskbench scenarios`, or a .toml path) instead of the options")] = None,
    cases: Annotated[str | None, typer.Option(help="with --scenario: only these case numbers, e.g. 0,3")] = None,
) -> None:
    """Benchmark backends: start everything, load, drain, audit the ledger, print the table."""
    from rich.console import Console

    if scenario is not None:
        run_scenario(scenario, cases, output, redis_url)
        return

    from taskbench import backends as registry
    from taskbench.driver import LoadSpec
    from taskbench.harness.config import Placement, RunConfig
    from taskbench.harness.faults import Fault
    from taskbench.harness.runner import Runner
    from taskbench.report.table import render

    console = Console(stderr=True)
    names = backend_names(backends)
    try:
        for name in names:
            registry.info(name)
        if enqueue_mode not in ("awaited", "after-response"):
            raise ValueError(f"--enqueue-mode must be awaited or after-response, not {enqueue_mode!r}")
        if model not in ("closed", "open", "ramp"):
            raise ValueError(f"--model must be closed, open or ramp, not {model!r}")
        if requests is None and duration is None:
            requests = 10_000
        load = LoadSpec(model=model, users=users, rate=rate, ramp_per_s=ramp,  # type: ignore[arg-type]
                        requests=requests, duration=duration, processes=driver_processes,
                        timeout=timeout)
        config = RunConfig(
            backends=tuple(names), workload=workload, load=load, workers=workers,
            concurrency=concurrency, enqueue_mode=enqueue_mode,  # type: ignore[arg-type]
            io_delay=io_delay, cpu_iterations=cpu_iterations, redis_url=redis_url,
            broker=broker, broker_url=broker_url,  # type: ignore[arg-type]
            output=output, keep=keep, warmup=warmup, drain_timeout=drain_timeout,
            api_port=api_port, placement=Placement.parse(pin), http_metrics=http_metrics,
            task_timeout=task_timeout, fault=Fault.parse(fault) if fault else None,
        )
    except ValueError as exc:
        fail(str(exc))

    runner = Runner(config, say=lambda text: console.print(f"[dim]{text}[/]"))
    result = execute(runner, console)
    render(result, Console())
    console.print(f"result: {runner.result_path()}")
    if not all(passed(case) for case in result["cases"]):
        raise typer.Exit(1)


def run_scenario(name: str, cases: str | None, output: Path, redis_url: str | None) -> None:
    from rich.console import Console

    from taskbench.scenarios import ScenarioError, resolve
    from taskbench.scenarios.report import render
    from taskbench.scenarios.run import ScenarioRunner

    console = Console(stderr=True)
    try:
        found = resolve(name)
        selected = None
        if cases:
            try:
                selected = [int(c) for c in cases.split(",") if c.strip()]
            except ValueError:
                raise ValueError(f"--cases takes case numbers like 0,3, not {cases!r}") from None
        runner = ScenarioRunner(found, output=output, redis_url=redis_url, cases=selected,
                                say=lambda text: console.print(f"[dim]{text}[/]"))
    except (ScenarioError, ValueError) as exc:
        fail(str(exc))

    console.print(f"[dim]scenario {found.name}: {len(runner.cases)} case(s) from {found.path}[/]")
    result = execute(runner, console)
    render(result, Console())
    console.print(f"result: {runner.result_path()}")
    if not all(passed(case, scenario=True) for case in result["cases"]):
        raise typer.Exit(1)
