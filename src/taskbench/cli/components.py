"""The processes of a run, startable by hand: ``serve``, ``worker``; and ``backends``, ``purge``,
``dashboard``, ``drain-case``."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated

import typer

from taskbench import params
from taskbench.cli._common import (
    Backend,
    BrokerOpt,
    BrokerUrl,
    RedisUrl,
    RunId,
    export,
    fail,
    interrupt_on_signals,
    settings,
)
from taskbench.procgroup import dump_stacks_on_signal
from taskbench.units import Duration


def backends() -> None:
    """List the backends, their brokers, their promise across a dead worker and their library's settings."""
    from taskbench.cli.backend_facts import facts

    for found in facts():
        meta = found.meta
        typer.echo(f"{meta.name:17} {'/'.join(meta.brokers):20} {meta.summary}{found.state}")
        for promise in found.promises:  # the promise a fault case is judged by (the libraries' defaults)
            delivery = promise.delivery
            typer.echo(f"{'':17} on {promise.broker:17} {delivery.guarantee}: {delivery.recovery}")
            for bound in delivery.all_bounds():  # what a fault may cost and keep the promise, and why
                typer.echo(f"{'':20} bound: {bound.describe()} [source: {bound.source}]")
        for promise in found.changed:  # a setting that changes it: the promise under another value
            typer.echo(f"{'':17} with --option {promise.setting}: {promise.delivery.guarantee}: "
                       f"{promise.delivery.recovery}")
        for key, kind, text in found.settings:
            typer.echo(f"{'':17} --option {meta.extra}.{key}=  {kind}, {text}")


def serve(
    backend: Backend = None,
    host: Annotated[str, typer.Option(help="bind address; loopback unless you mean it")] = "127.0.0.1",
    port: Annotated[int, typer.Option(min=1, max=65535)] = 8000,
    api_processes: Annotated[int, typer.Option(
        min=1, max=64, help="the API's processes (uvicorn's workers; --workers is a backend's worker processes)")] = 1,
    redis_url: RedisUrl = None,
    run_id: RunId = None,
    enqueue_mode: Annotated[str | None, params.option("enqueue_mode")] = None,
    broker: BrokerOpt = None,
    broker_url: BrokerUrl = None,
) -> None:
    """Run the reference API for one backend (uvicorn)."""
    dump_stacks_on_signal()  # a stop the harness has to force says where it hung
    export(backend=backend, redis_url=redis_url, run_id=run_id, enqueue_mode=enqueue_mode,
           broker=broker, broker_url=broker_url)
    found = settings()
    from taskbench.metrics import prepare_component

    if api_processes > 1:  # each scrape must add up every uvicorn worker: prometheus_client's multiprocess mode
        prepare_component(f"api-{os.getpid()}")  # shared by the uvicorn workers, before they import anything
    # one worker keeps its metrics in memory: the mmap-backed values of multiprocess mode cost the API
    # about 25 µs a request (docs/benchmarks.md)
    import uvicorn

    from taskbench.brokers.redis import check_reachable
    from taskbench.harness import HarnessError
    from taskbench.net import check_port_free
    from taskbench.service.server import BoundedHttpProtocol

    try:
        check_reachable(found.redis_url)
        if found.own_broker_redis:
            check_reachable(found.broker_address)  # the broker Redis, when it is another server
        check_port_free(host, port)
    except HarnessError as exc:
        fail(str(exc))
    uvicorn.run(
        "taskbench.service.app:create_app",
        factory=True,
        host=host,
        port=port,
        workers=api_processes,
        loop="uvloop",
        http=BoundedHttpProtocol,  # httptools, with bounds on what a client can hold (service/server.py)
        ws="none",  # no WebSocket route: an upgrade never leaves the bounded protocol (were a library there)
        timeout_keep_alive=5,  # an idle keep-alive connection is closed after 5 s
        access_log=False,
        log_level="warning",
        timeout_graceful_shutdown=int(found.shutdown_timeout),
    )


def worker(
    backend: Backend = None,
    redis_url: RedisUrl = None,
    run_id: RunId = None,
    concurrency: Annotated[int | None, params.option("concurrency")] = None,
    log_level: Annotated[str, typer.Option(help="logging level; per-task INFO lines cost CPU")] = "WARNING",
    broker: BrokerOpt = None,
    broker_url: BrokerUrl = None,
) -> None:
    """Run one worker process of a backend."""
    import logging

    dump_stacks_on_signal()  # a stop the harness has to force says where it hung

    export(backend=backend, redis_url=redis_url, run_id=run_id, concurrency=concurrency,
           broker=broker, broker_url=broker_url)
    found = settings()
    logging.basicConfig(level=log_level.upper(), format="%(asctime)s %(name)s %(message)s")
    from taskbench.metrics import prepare_component

    prepare_component(f"worker-{os.getpid()}")  # before any library imports prometheus_client
    from taskbench.brokers.redis import check_reachable
    from taskbench.harness import HarnessError
    from taskbench.worker import main

    try:
        check_reachable(found.redis_url)
        if found.own_broker_redis:
            check_reachable(found.broker_address)  # the broker Redis, when it is another server
    except HarnessError as exc:
        fail(str(exc))
    main(found)


def prepare(backend: Backend = None, run_id: RunId = None, broker: BrokerOpt = None,
            broker_url: BrokerUrl = None) -> None:
    """Prepare a run's broker once, before its API and workers start (a PostgreSQL queue's schema)."""
    import asyncio

    from taskbench import backends as registry
    from taskbench.backends.base import PreparesBroker

    export(backend=backend, run_id=run_id, broker=broker, broker_url=broker_url)
    found = settings()
    loaded = registry.load(found.backend)
    if isinstance(loaded, PreparesBroker):
        asyncio.run(loaded.prepare_broker(found))


def purge(backend: Backend = None, run_id: RunId = None, broker: BrokerOpt = None,
          broker_url: BrokerUrl = None) -> None:
    """Delete a run's queues/streams on its broker (the harness calls this after a case)."""
    import asyncio

    from taskbench import backends as registry

    export(backend=backend, run_id=run_id, broker=broker, broker_url=broker_url)
    found = settings()
    asyncio.run(registry.load(found.backend).purge(found))


def dashboard(
    backend: Backend = None,
    host: Annotated[str, typer.Option(help="bind address; loopback unless you give --auth")] = "127.0.0.1",
    port: Annotated[int, typer.Option(min=1, max=65535)] = 8100,
    auth: Annotated[str | None, typer.Option(envvar="TASKBENCH_DASHBOARD_AUTH",
                                             help="USER:PASSWORD for HTTP basic auth")] = None,
) -> None:
    """Serve a backend's own web dashboard (SAQ web, Flower); `taskbench up` starts it for you."""
    import asyncio

    from taskbench import backends as registry
    from taskbench.backends.base import HasDashboard

    export(backend=backend)
    found = settings()
    if host not in ("127.0.0.1", "localhost", "::1") and not auth:
        fail(f"--host {host}: this dashboard can change tasks; give --auth USER:PASSWORD")
    if auth is not None and ":" not in auth:
        fail("--auth must be USER:PASSWORD")
    impl = registry.load(found.backend)
    if not isinstance(impl, HasDashboard):
        fail(f"backend {found.backend!r} has no dashboard")
    asyncio.run(impl.run_dashboard(found, host, port, auth))


def drain_case(
    tasks: Annotated[int, typer.Option(min=1)] = 20_000,
    seconds: Annotated[float, typer.Option(**Duration(1, 86_400).settings())] = 60.0,
    log_dir: Annotated[Path, typer.Option()] = Path("."),
    workload: Annotated[str, typer.Option()] = "io/simple",
    worker_cpus: Annotated[str, typer.Option(help="comma-separated cores for the worker process; empty: any")] = "",
    paired: Annotated[str, typer.Option(
        help="on | off: drain two runs at once, the ledger on in one worker and off in the other, this "
             "mode's worker started first; empty: one worker, the ledger as the settings have it")] = "",
    workers: Annotated[int, typer.Option(min=1, max=64, help="worker processes per backend")] = 1,
    payload: Annotated[Path | None, typer.Option(help="a JSON file: your task's payload template")] = None,
    broker_pids: Annotated[str, typer.Option(help="comma-separated pids of the broker's processes")] = "",
) -> None:
    """Run inside a backend's environment by `taskbench drain`; prints one JSON line (paired: a list)."""
    import json

    from taskbench.drain_case import measure, measure_pair

    interrupt_on_signals()  # stopped by the harness: the workers it started are stopped too
    cpus = [int(c) for c in worker_cpus.split(",") if c.strip()] or None
    if paired not in ("", "on", "off"):
        fail(f"--paired must be on or off, not {paired!r}")
    try:
        if paired:
            rows = measure_pair(settings(), tasks, log_dir, seconds, workload=workload, worker_cpus=cpus,
                                first=paired == "on")
            print(json.dumps(rows))
            return
        template = None
        if payload is not None:
            from taskbench import payload as payloads

            template = payloads.read(payload)
        pids = tuple(int(p) for p in broker_pids.split(",") if p.strip())
        print(json.dumps(measure(settings(), tasks, log_dir, seconds, workload=workload, worker_cpus=cpus,
                                 workers=workers, payload=template, broker_pids=pids)))
    except KeyboardInterrupt:
        raise typer.Exit(130) from None
