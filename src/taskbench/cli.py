"""Command line: ``taskbench run | serve | worker | report | backends``.

Heavy imports (FastAPI, uvicorn, the harness, rich tables) happen inside the commands, so that
``--help`` is instant and a missing extra gives an install hint instead of a traceback.
"""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NoReturn

import typer

if TYPE_CHECKING:
    from taskbench.harness.runner import Runner
    from taskbench.harness.up import Stack
    from taskbench.results import Result
    from taskbench.scenarios.run import ScenarioRunner
    from taskbench.settings import Settings

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    help="Benchmark and audit FastAPI background-task backends on your own hardware.",
)

Backend = Annotated[
    str | None, typer.Option("--backend", "-b", help="backend name (default: TASKBENCH_BACKEND)")
]
RedisUrl = Annotated[str | None, typer.Option(help="Redis URL (default: TASKBENCH_REDIS_URL)")]
RunId = Annotated[str | None, typer.Option(help="key namespace of the run (default: TASKBENCH_RUN_ID)")]
BrokerOpt = Annotated[str | None, typer.Option(help="redis | rabbitmq | nats (default: TASKBENCH_BROKER)")]
BrokerUrl = Annotated[str | None, typer.Option(help="broker URL (default: the broker's local default)")]


def _fail(message: str, code: int = 2) -> NoReturn:
    typer.secho(f"taskbench: {message}", err=True, fg=typer.colors.RED)
    raise typer.Exit(code)


def _export(**values: object) -> None:
    """Command-line options override the TASKBENCH_* environment of this process and its children."""
    for key, value in values.items():
        if value is not None:
            os.environ[f"TASKBENCH_{key.upper()}"] = str(value)


def _settings() -> Settings:
    from pydantic import ValidationError

    from taskbench import backends
    from taskbench.settings import Settings

    try:
        settings = Settings()
        backends.info(settings.backend)
    except ValidationError as exc:
        _fail(f"invalid setting: {exc.errors()[0]['loc'][0]}: {exc.errors()[0]['msg']}")
    except ValueError as exc:
        _fail(str(exc))
    return settings


@app.command()
def backends() -> None:
    """List the backends and the extra that installs each."""
    from taskbench.backends import REGISTRY

    for meta in REGISTRY.values():
        state = "" if meta.implemented else " (not implemented yet)"
        brokers = "/".join(meta.brokers)
        typer.echo(f"{meta.name:11} {brokers:20} {meta.summary}{state}")


@app.command()
def serve(
    backend: Backend = None,
    host: Annotated[str, typer.Option(help="bind address; loopback unless you mean it")] = "127.0.0.1",
    port: Annotated[int, typer.Option(min=1, max=65535)] = 8000,
    workers: Annotated[int, typer.Option(min=1, max=64, help="uvicorn worker processes")] = 1,
    redis_url: RedisUrl = None,
    run_id: RunId = None,
    enqueue_mode: Annotated[str | None, typer.Option(help="awaited | after-response")] = None,
    broker: BrokerOpt = None,
    broker_url: BrokerUrl = None,
) -> None:
    """Run the reference API for one backend (uvicorn)."""
    _export(backend=backend, redis_url=redis_url, run_id=run_id, enqueue_mode=enqueue_mode,
            broker=broker, broker_url=broker_url)
    settings = _settings()
    from taskbench.metrics import prepare_component

    prepare_component(f"api-{os.getpid()}")  # shared by the uvicorn workers, before they import anything
    import uvicorn

    from taskbench.harness import HarnessError
    from taskbench.harness.redis_server import check_reachable
    from taskbench.net import check_port_free

    try:
        check_reachable(settings.redis_url)
        check_port_free(host, port)
    except HarnessError as exc:
        _fail(str(exc))
    uvicorn.run(
        "taskbench.service.app:create_app",
        factory=True,
        host=host,
        port=port,
        workers=workers,
        loop="uvloop",
        http="httptools",
        access_log=False,
        log_level="warning",
        timeout_graceful_shutdown=int(settings.shutdown_timeout),
    )


@app.command()
def worker(
    backend: Backend = None,
    redis_url: RedisUrl = None,
    run_id: RunId = None,
    concurrency: Annotated[int | None, typer.Option(min=1, max=10_000)] = None,
    log_level: Annotated[str, typer.Option(help="logging level; per-task INFO lines cost CPU")] = "WARNING",
    broker: BrokerOpt = None,
    broker_url: BrokerUrl = None,
) -> None:
    """Run one worker process of a backend."""
    import logging

    _export(backend=backend, redis_url=redis_url, run_id=run_id, concurrency=concurrency,
            broker=broker, broker_url=broker_url)
    settings = _settings()
    logging.basicConfig(level=log_level.upper(), format="%(asctime)s %(name)s %(message)s")
    from taskbench.metrics import prepare_component

    prepare_component(f"worker-{os.getpid()}")  # before any library imports prometheus_client
    from taskbench.harness import HarnessError
    from taskbench.harness.redis_server import check_reachable
    from taskbench.worker import main

    try:
        check_reachable(settings.redis_url)
    except HarnessError as exc:
        _fail(str(exc))
    main(settings)


@app.command()
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
        _run_scenario(scenario, cases, output, redis_url)
        return

    from taskbench import backends as registry
    from taskbench.driver import LoadSpec
    from taskbench.harness.config import Placement, RunConfig
    from taskbench.harness.faults import Fault
    from taskbench.harness.runner import Runner
    from taskbench.report.table import render

    console = Console(stderr=True)
    names = registry.available() if backends == "all" else [b.strip() for b in backends.split(",") if b.strip()]
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
        _fail(str(exc))

    runner = Runner(config, say=lambda text: console.print(f"[dim]{text}[/]"))
    result = _execute(runner, console)
    render(result, Console())
    console.print(f"result: {runner.result_path()}")
    if not result.passed():
        raise typer.Exit(1)


def _interrupt_on_signals() -> None:
    """SIGINT and SIGTERM raise KeyboardInterrupt, so the stop path runs and stops every process.

    SIGINT is set explicitly: a shell starts a background job with SIGINT ignored, and Python keeps
    an inherited "ignore", so ``taskbench run &`` could otherwise not be interrupted.
    """

    def on_term(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, on_term)


def _execute(runner: Runner | ScenarioRunner, console: Any) -> Result:
    """Run a Runner or ScenarioRunner: SIGTERM acts as Ctrl-C, errors become one line."""
    from taskbench.harness import HarnessError

    _interrupt_on_signals()
    try:
        result = runner.run()
    except HarnessError as exc:
        _fail(str(exc))
    except KeyboardInterrupt:
        _fail("interrupted; every process it started was stopped", code=130)
    return result


@app.command("scenarios")
def list_scenarios(
    parameters: Annotated[bool, typer.Option(
        "--parameters", help="list the parameters a case of each kind takes, with their ranges")] = False,
) -> None:
    """List the shipped scenarios (the seed articles' experiments); run one with `run --scenario NAME`."""
    from taskbench.scenarios import FILES, ScenarioError, load, shipped
    from taskbench.scenarios.spec import FIGURES, PARAMETERS

    if parameters:
        for kind, params in PARAMETERS.items():
            typer.echo(f"{kind} scenarios:")
            for name, (typ, allowed, text) in sorted(params.items()):
                if isinstance(allowed, tuple) and allowed and isinstance(allowed[0], str):
                    values = " | ".join(allowed)
                elif isinstance(allowed, tuple):
                    low, high = (f"{v:d}" if typ is int else f"{v:g}" for v in allowed)
                    values = f"{typ.__name__} {low}..{high}"
                else:
                    values = typ.__name__
                typer.echo(f"  {name:18} {values:32} {text}")
        typer.echo(f"article figures ([[article.rows]]): {', '.join(FIGURES)}")
        return
    for path in shipped():
        try:
            found = load(path)
        except ScenarioError as exc:
            typer.echo(f"{path.stem:20} BROKEN: {exc}")
            continue
        seed = f"seed {found.seed}" if found.seed else ""
        typer.echo(f"{found.name:20} {found.kind:7} {len(found.cases):3} cases  {seed:9} {found.description}")
    typer.echo(f"\nthe files: {FILES}")
    typer.echo("run one: taskbench run --scenario NAME   (or a path to your own copy of a file; "
               "`taskbench scenarios --parameters` lists what a case takes)")


def _run_scenario(name: str, cases: str | None, output: Path, redis_url: str | None) -> None:
    from rich.console import Console

    from taskbench.report.scenario import render
    from taskbench.scenarios import ScenarioError, resolve
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
        _fail(str(exc))

    console.print(f"[dim]scenario {found.name}: {len(runner.cases)} case(s) from {found.path}[/]")
    result = _execute(runner, console)
    render(result, Console())
    console.print(f"result: {runner.result_path()}")
    if not result.passed():
        raise typer.Exit(1)


@app.command(hidden=True)
def purge(backend: Backend = None, run_id: RunId = None, broker: BrokerOpt = None,
          broker_url: BrokerUrl = None) -> None:
    """Delete a run's queues/streams on its broker (the harness calls this after a case)."""
    import asyncio

    from taskbench import backends

    _export(backend=backend, run_id=run_id, broker=broker, broker_url=broker_url)
    settings = _settings()
    asyncio.run(backends.load(settings.backend).purge(settings))


@app.command(hidden=True)
def dashboard(
    backend: Backend = None,
    host: Annotated[str, typer.Option(help="bind address; loopback unless you give --auth")] = "127.0.0.1",
    port: Annotated[int, typer.Option(min=1, max=65535)] = 8100,
    auth: Annotated[str | None, typer.Option(envvar="TASKBENCH_DASHBOARD_AUTH",
                                             help="USER:PASSWORD for HTTP basic auth")] = None,
) -> None:
    """Serve a backend's own web dashboard (SAQ web, Flower); `taskbench up` starts it for you."""
    import asyncio

    from taskbench import backends
    from taskbench.backends.base import HasDashboard

    _export(backend=backend)
    settings = _settings()
    if host not in ("127.0.0.1", "localhost", "::1") and not auth:
        _fail(f"--host {host}: this dashboard can change tasks; give --auth USER:PASSWORD")
    if auth is not None and ":" not in auth:
        _fail("--auth must be USER:PASSWORD")
    impl = backends.load(settings.backend)
    if not isinstance(impl, HasDashboard):
        _fail(f"backend {settings.backend!r} has no dashboard")
    asyncio.run(impl.run_dashboard(settings, host, port, auth))


@app.command()
def up(
    backends: Annotated[str, typer.Option(help="comma-separated backends, or 'all'")] = "arq",
    workers: Annotated[int, typer.Option(min=1, max=64, help="worker processes per backend")] = 1,
    concurrency: Annotated[int, typer.Option(min=1, max=10_000, help="tasks at once per worker")] = 10,
    redis_url: Annotated[str | None, typer.Option(help="use this Redis instead of an embedded one")] = None,
    host: Annotated[str, typer.Option(help="bind address of the APIs and dashboards")] = "127.0.0.1",
    port: Annotated[int, typer.Option(min=1, max=65000, help="first port; the others follow")] = 8000,
    prometheus: Annotated[bool | None, typer.Option(help="start Prometheus (default: if installed)")] = None,
    prometheus_port: Annotated[int, typer.Option(min=1, max=65535)] = 9090,
    auth: Annotated[str | None, typer.Option(help="USER:PASSWORD for the dashboards beyond loopback")] = None,
    output: Annotated[Path, typer.Option(help="folder for logs and Prometheus data")] = Path("results"),
) -> None:
    """Start the live stack (Redis, APIs, workers, dashboards, Prometheus), print its URLs, stop on Ctrl-C."""
    from rich.console import Console
    from rich.live import Live

    from taskbench import backends as registry
    from taskbench.harness import HarnessError
    from taskbench.harness.up import Up, UpConfig, live_table

    console = Console()
    names = registry.available() if backends == "all" else [b.strip() for b in backends.split(",") if b.strip()]
    try:
        config = UpConfig(backends=tuple(names), workers=workers, concurrency=concurrency, redis_url=redis_url,
                          host=host, port=port, prometheus=prometheus, prometheus_port=prometheus_port,
                          auth=auth, output=output)
    except ValueError as exc:
        _fail(str(exc))

    _interrupt_on_signals()
    stack_up = Up(config, say=lambda text: console.print(f"[dim]{text}[/]"))
    live: Live | None = None

    def show(stack: Stack, rows: list[dict[str, Any]]) -> None:
        nonlocal live
        if live is None:
            for url in stack.urls:
                console.print(f"{url.name:28} {url.url}")
            console.print("[dim]Ctrl-C stops everything[/]")
            live = Live(live_table(rows), console=console, auto_refresh=False)
            live.start()
        live.update(live_table(rows), refresh=True)

    try:
        stack_up.serve_forever(show)
    except HarnessError as exc:
        _fail(str(exc))
    except KeyboardInterrupt:
        pass
    finally:
        if live is not None:
            live.stop()
    console.print("stopped; no process left running")


@app.command()
def ceiling(
    users: Annotated[int, typer.Option(min=1, max=10_000)] = 100,
    requests: Annotated[int, typer.Option(min=1, max=10_000_000)] = 20_000,
    driver_processes: Annotated[int, typer.Option(min=1, max=64)] = 1,
    redis_url: Annotated[str | None, typer.Option(help="use this Redis instead of an embedded one")] = None,
    pin: Annotated[str, typer.Option(help="core placement, as for `run`")] = "auto",
    output: Annotated[Path, typer.Option(help="folder for logs")] = Path("results"),
) -> None:
    """Measure the ceiling: a bare FastAPI endpoint doing one `await redis.incr`, same load as `run`."""
    from taskbench.driver import LoadSpec
    from taskbench.harness import HarnessError
    from taskbench.harness.ceiling import measure_ceiling
    from taskbench.harness.config import Placement, RunConfig

    try:
        config = RunConfig(load=LoadSpec(users=users, requests=requests, processes=driver_processes),
                           redis_url=redis_url, placement=Placement.parse(pin), output=output)
        data = measure_ceiling(config)
    except (ValueError, HarnessError) as exc:
        _fail(str(exc))
    lat = data.latency_ms
    typer.echo(f"ceiling (FastAPI + one await redis.incr): {data.rps:.0f} req/s, "
               f"median {lat.p50:.1f} ms, p95 {lat.p95:.1f} ms, errors {data.errors}, "
               f"driver CPU {100 * data.max_utilization:.0f} %")


@app.command()
def drain(
    backends: Annotated[str, typer.Option(help="comma-separated backends, or 'all'")] = "arq",
    tasks: Annotated[int, typer.Option(min=1, max=1_000_000)] = 20_000,
    concurrency: Annotated[int, typer.Option(min=1, max=10_000, help="tasks at once in the worker")] = 10,
    ledger: Annotated[str, typer.Option(help="on | off | both (both measures the ledger's cost)")] = "both",
    redis_url: Annotated[str | None, typer.Option(help="use this Redis instead of an embedded one")] = None,
    output: Annotated[Path, typer.Option(help="folder for logs and drain.json")] = Path("results"),
) -> None:
    """One worker process's drain rate on no-op tasks (enqueued beforehand, no HTTP)."""
    from rich.console import Console
    from rich.table import Table

    from taskbench import backends as registry
    from taskbench.harness import HarnessError
    from taskbench.harness.drain import run_drain

    console = Console(stderr=True)
    modes = {"on": [True], "off": [False], "both": [True, False]}.get(ledger)
    if modes is None:
        _fail(f"--ledger must be on, off or both, not {ledger!r}")
    try:
        names = registry.available() if backends == "all" else [b.strip() for b in backends.split(",") if b.strip()]
        for name in names:
            registry.info(name)
        rows = run_drain(names, tasks=tasks, concurrency=concurrency, ledger_modes=modes,
                         redis_url=redis_url, output=output, say=lambda t: console.print(f"[dim]{t}[/]"))
    except (ValueError, HarnessError) as exc:
        _fail(str(exc))
    table = Table(title=f"drain of {tasks} no-op tasks by one worker process (concurrency {concurrency})")
    for col in ("backend", "version", "ledger", "enqueue/s (no HTTP)", "drain s", "drain tasks/s", "executed"):
        table.add_column(col)
    for row in rows:
        table.add_row(row["backend"], str(row["version"]), "on" if row["ledger"] else "off",
                      f"{row['enqueue_per_s']:.0f}", f"{row['drain_s']:.2f}", f"{row['drain_per_s']:.0f}",
                      str(row["executed"]))
    Console().print(table)


@app.command("drain-case", hidden=True)
def drain_case(
    tasks: Annotated[int, typer.Option(min=1)] = 20_000,
    log_dir: Annotated[Path, typer.Option()] = Path("."),
) -> None:
    """Run inside a backend's environment by `taskbench drain`; prints one JSON line."""
    import json

    from taskbench.drain import measure

    print(json.dumps(measure(_settings(), tasks, log_dir)))


@app.command()
def report(
    result: Annotated[Path, typer.Argument(help="a result.json written by `taskbench run`")],
    format: Annotated[str, typer.Option("--format", help="table | json | markdown (scenarios)")] = "table",
) -> None:
    """Render a result file (of `run`, or of `run --scenario`; older schemas are read too)."""
    from taskbench.results import ResultFormatError, load

    if format not in ("table", "json", "markdown"):
        _fail(f"--format must be table, json or markdown, not {format!r}")
    try:
        data = load(result)
    except ResultFormatError as exc:
        _fail(str(exc))
    if format == "json":
        sys.stdout.write(data.to_json() + "\n")
        return
    from rich.console import Console

    if data.kind == "scenario":
        from taskbench.report import scenario as scenario_report

        if format == "markdown":
            sys.stdout.write(scenario_report.markdown(data))
        else:
            scenario_report.render(data, Console())
        return
    if format == "markdown":
        _fail("--format markdown renders scenario results; this is a `run` result")

    from taskbench.report.table import render

    render(data, Console())
