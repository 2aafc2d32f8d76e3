"""Beyond one machine: ``taskbench drive`` (one driver of many), ``taskbench collector`` (merge and audit, the
cluster's Job) and ``taskbench collect`` (the collector's result into ``results/<run>/``). docs/scale-out.md."""

from __future__ import annotations

import socket
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any
from urllib.parse import urlsplit

import typer

from taskbench import params
from taskbench.units import Duration

if TYPE_CHECKING:
    from rich.console import Console

    from taskbench.driver import RequestTemplate
    from taskbench.harness.config import RunConfig
from taskbench.cli._common import RedisUrl, RunId, export, fail, say_on, settings

#: the collector's result line in its log: this marker, a space, the result's JSON on one line
RESULT_MARKER = "TASKBENCH-RESULT"
#: a collector's log longer than this is not one (its result line is a few hundred KB at most)
LOG_BYTES = 64 * 1024 * 1024


def drive(
    segment: Annotated[str, typer.Option(help="INDEX/COUNT: this driver's share of the load, e.g. 0/3")],
    url: Annotated[str, typer.Option(help="the API route to load, e.g. http://taskbench-api:8000/api/v1/incr/"
                                          "io/simple/arq")],
    allow_remote: Annotated[bool, typer.Option(
        help="send load to an address that is not loopback (a pod, a network namespace): never by default")] = False,
    node: Annotated[str | None, typer.Option(help="this driver's name in the result (default: the host name)")] = None,
    model: Annotated[str, params.option("model")] = params.default("model"),
    users: Annotated[int, params.option("users")] = params.default("users"),
    rate: Annotated[float | None, params.option("rate")] = params.default("rate"),
    ramp: Annotated[float, params.option("ramp")] = params.default("ramp"),
    requests: Annotated[int | None, params.option("requests")] = params.default("requests"),
    duration: Annotated[float | None, params.option("duration")] = params.default("duration"),
    driver_processes: Annotated[int, params.option("driver_processes")] = params.default("driver_processes"),
    timeout: Annotated[float, params.option("timeout")] = params.default("timeout"),
    barrier_timeout: Annotated[float, typer.Option(
        help="seconds to wait for the API, the workers and every other driver", **Duration(1, 3600).settings())
    ] = 300.0,
    wait_workers: Annotated[int, typer.Option(
        min=0, max=10_000, help="first wait until the API answers /health and this many workers registered")] = 0,
    redis_url: RedisUrl = None,
    run_id: RunId = None,
) -> None:
    """Drive one segment of a load (the whole load's options; this driver takes its share), starting with
    the others (a barrier in the ledger's Redis), and hand the raw result to the collector."""
    from taskbench.driver import RequestTemplate
    from taskbench.driver.segments import parse_segment
    from taskbench.harness import HarnessError
    from taskbench.harness.case.own_task import BUILT_IN_BODY
    from taskbench.harness.commands.drive import drive_segment
    from taskbench.harness.config import load_spec
    from taskbench.harness.faults.stalls import redis_client

    export(redis_url=redis_url, run_id=run_id)
    found = settings()
    try:
        index, count = parse_segment(segment)
        parts = urlsplit(url)
        if parts.scheme != "http" or not parts.hostname or not parts.path.startswith("/"):
            raise ValueError(f"--url {url!r}: give http://HOST:PORT/path")
        template = RequestTemplate(host=parts.hostname, port=parts.port or 80, path=parts.path,
                                   body=BUILT_IN_BODY, remote=allow_remote)
        spec = load_spec({"model": model, "users": users, "rate": rate, "ramp": ramp, "requests": requests,
                          "duration": duration, "driver_processes": driver_processes, "timeout": timeout})
    except ValueError as exc:
        fail(f"{exc}" + (" (give --allow-remote to load it)" if "loopback" in str(exc) else ""))
    client = redis_client(found.redis_url)
    try:
        if wait_workers:
            ready_for_load(template, client, found.ready_key, wait_workers, barrier_timeout)
        drive_segment(template, spec, index=index, count=count, node=node or socket.gethostname(), client=client,
                      prefix=found.prefix, barrier_timeout=barrier_timeout, say=lambda t: typer.echo(t, err=True))
    except (HarnessError, ValueError, RuntimeError) as exc:
        fail(str(exc))
    finally:
        client.close()


def ready_for_load(template: RequestTemplate, client: Any, ready_key: str, workers: int, timeout: float) -> None:
    """Wait until the API answers ``/health`` and ``workers`` workers registered (a pod may start first)."""
    import urllib.error
    import urllib.request

    from taskbench.wait import WaitTimeoutError, wait_until

    health = f"http://{template.connect_host}:{template.port}/health"

    def ready() -> bool:
        try:
            with urllib.request.urlopen(health, timeout=2) as resp:
                if resp.status != 200:
                    return False
        except (urllib.error.URLError, OSError):
            return False
        return int(client.hlen(ready_key)) >= workers

    try:
        wait_until(ready, timeout, interval=0.5, what=f"{health} and {workers} worker(s) to be ready")
    except WaitTimeoutError as exc:
        fail(str(exc))


def collector(
    drivers: Annotated[int, typer.Option(min=1, max=1000, help="how many drivers to wait for")],
    workers: Annotated[int, params.option("workers")] = params.default("workers"),
    workload: Annotated[str, params.option("workload")] = params.default("workload"),
    wait: Annotated[float, typer.Option(help="seconds to wait for every driver's result",
                                        **Duration(1, 86_400).settings())] = 3900.0,
    drain_timeout: Annotated[float, params.option("drain_timeout")] = params.default("drain_timeout"),
    drain_stall: Annotated[float, params.option("drain_stall")] = params.default("drain_stall"),
    redis_url: RedisUrl = None,
    run_id: RunId = None,
) -> None:
    """Wait for every driver's segment, merge them, drain and audit the ledger; print the result (one line
    after the TASKBENCH-RESULT marker, for `taskbench collect`) and exit 1 unless it passed."""
    from taskbench import backends, brokers
    from taskbench.harness import HarnessError
    from taskbench.harness.brokers import case_durability
    from taskbench.harness.commands.collect import Collect, collect_case, distributed_result
    from taskbench.harness.commands.drive import whole_load
    from taskbench.harness.faults.stalls import redis_client
    from taskbench.harness.machine import result_header

    export(redis_url=redis_url, run_id=run_id)
    found = settings()
    client = redis_client(found.redis_url)
    broker = redis_client(found.broker_address) if brokers.info(found.broker).can_be_ledger else None
    try:
        durability = case_durability(backends.info(found.backend), found.enqueue_mode, found.broker,
                                     broker or client, broker_url=found.broker_address)
        spec = Collect(settings=found, workload=workload, drivers=drivers, workers=workers,
                       durable=durability.durable, durability=durability.text, segment_timeout=wait,
                       drain_timeout=drain_timeout, drain_stall=drain_stall)
        case, segments = collect_case(client, spec, say=lambda t: typer.echo(t, err=True))
        config = {"backends": [found.backend], "workload": workload, "workers": workers, "drivers": drivers,
                  "concurrency": found.concurrency, "broker": found.broker, "enqueue_mode": found.enqueue_mode,
                  "load": whole_load(client, found.prefix), "where": "kubernetes"}
        result = distributed_result(case, segments, header=result_header(found.run_id, None), config=config)
        text = result.model_dump_json()
        client.set(f"{found.prefix}result", text)
    except HarnessError as exc:
        fail(str(exc))
    finally:
        client.close()
        if broker is not None:
            broker.close()
    typer.echo(f"{RESULT_MARKER} {result.redacted().model_dump_json()}")
    if not result.passed():
        raise typer.Exit(1)


def collect(
    source: Annotated[str, typer.Argument(help="the collector's log (`kubectl logs job/taskbench-collector`), "
                                               "a file or - for standard input")],
    output: Annotated[Path, typer.Option(help="folder for results")] = Path("results"),
) -> None:
    """Put a cluster run's result into results/<run>/, which report and compare read as any run's.

    The folder gets result.json and report.html."""
    import json

    from taskbench import inputs
    from taskbench.cli.report import publish
    from taskbench.files import write_atomic
    from taskbench.report.table import render
    from taskbench.results import ResultFormatError, parse
    from taskbench.terminal import console

    try:
        text = sys.stdin.read(LOG_BYTES + 1) if source == "-" else inputs.read_text(source, LOG_BYTES)
    except (OSError, UnicodeDecodeError, inputs.InputError) as exc:
        fail(f"cannot read {source}: {exc}")
    if len(text) > LOG_BYTES:
        fail(f"cannot read {source}: larger than {LOG_BYTES:,} characters")
    lines = [line for line in text.splitlines() if line.startswith(f"{RESULT_MARKER} ")]
    if not lines:
        fail(f"{source}: no {RESULT_MARKER} line: is it the collector's log, and has the collector finished?")
    try:
        result = parse(json.loads(lines[-1][len(RESULT_MARKER) + 1:]))
    except RecursionError:
        fail(f"{source}: the result line is not a taskbench result (JSON nested too deep)")
    except (ValueError, ResultFormatError) as exc:
        fail(f"{source}: the result line is not a taskbench result: {str(exc).splitlines()[0]}")
    path = _result_path(output, result.run_id, source)
    try:
        write_atomic(path, result.to_json())
    except OSError as exc:
        fail(f"cannot write {path}: {exc.strerror or exc}")
    render(result, console())
    typer.echo(f"result: {path}")
    publish(result, path, output, typer.echo)
    if not result.passed():
        raise typer.Exit(1)


def _result_path(output: Path, run_id: str, source: str) -> Path:
    """``output/<run id>/result.json`` for a run id read from ``source``: checked as a typed one, and its
    folder inside ``output`` (not a link out of it), else one line; nothing is written outside ``output``."""
    from taskbench.settings import check_run_id

    try:
        folder = output / check_run_id(run_id, f"{source}: the result's run id")
        folder.mkdir(parents=True, exist_ok=True)
        if not folder.resolve().is_relative_to(output.resolve()):
            fail(f"{folder} leads out of --output {output} (a link to {folder.resolve()}): remove it or give "
                 "another --output")
    except ValueError as exc:
        fail(str(exc))
    except OSError as exc:
        fail(f"cannot write {output / run_id}: {exc.strerror or exc}")
    return folder / "result.json"


def run_nodes(config: RunConfig, nodes: int, delay_ms: float, console: Console, output: Path) -> None:
    """``taskbench run --nodes N``: the run in network namespaces; the table, the page, exit 1 unless it passed."""
    from rich.console import Console

    from taskbench.cli._common import INTERRUPTED, interrupt_on_signals, os_error, show_progress, writable_folder
    from taskbench.cli.report import publish
    from taskbench.harness import HarnessError
    from taskbench.harness.nodes.cluster import NodesRunner
    from taskbench.report.table import render

    writable_folder(output)
    show_progress(console)
    interrupt_on_signals()
    try:
        runner = NodesRunner(config, nodes, delay_ms=delay_ms,
                             say=say_on(console))
        result = runner.run()
    except HarnessError as exc:
        fail(str(exc))
    except OSError as exc:
        fail(os_error(exc))
    except KeyboardInterrupt:
        fail(INTERRUPTED, code=130)
    render(result, Console())
    console.print(f"result: {runner.result_path()}", markup=False)
    publish(result, runner.result_path(), output, lambda text: console.print(text, markup=False))
    if not result.passed():
        raise typer.Exit(1)
