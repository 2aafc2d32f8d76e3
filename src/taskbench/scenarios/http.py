"""HTTP scenarios: one server + app variant per case, driven over loopback; no queue, no ledger.

Each case starts its server in a fresh process group (from the ``servers`` environment, which holds
uvicorn, hypercorn with trio, and granian), waits for ``/health``, applies the ``server`` limits to its
process tree, warms up, drives the load, reads the peak of requests in flight from the app's stats
files and the server's CPU time, and stops it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import Any

from taskbench.driver import LoadSpec, RequestTemplate, run_load
from taskbench.harness import HarnessError
from taskbench.harness.config import Placement
from taskbench.harness.processes.cgroups import tree_cpu
from taskbench.harness.processes.envs import pinned_pythonpath
from taskbench.harness.processes.peaks import Peaks
from taskbench.harness.processes.pinning import pinned
from taskbench.harness.processes.stack import Stack
from taskbench.net import established, free_port, healthy
from taskbench.results import HttpCase, SeriesPoint, Summary
from taskbench.scenarios.parse import Case
from taskbench.wait import wait_until

Say = Callable[[str], None]

APP = "taskbench.scenarios.asgi:app"
#: seconds between two counts of the server's established connections during the load
CONNECTIONS_INTERVAL = 0.5
ROUTES = {"async-sleep": "/async-sleep", "def-sleep": "/def-sleep", "def-sleep-model": "/def-sleep-model",
          "async-blocking": "/async-blocking", "hello": "/hello"}

@cache
def _uvicorn_option(python: str, option: str) -> bool:
    """Whether the uvicorn of ``python``'s environment takes ``option`` (its --help names it)."""
    out = subprocess.run([python, "-m", "uvicorn", "--help"], capture_output=True, text=True, timeout=60, check=False)
    return option in out.stdout


def server_argv(python: Path, params: dict[str, Any], port: int) -> list[str]:
    server = params.get("server", "uvicorn")
    workers = str(params.get("server_workers", 1))
    loop = params.get("worker_class", "uvloop")
    if server == "uvicorn":
        if loop == "trio":
            raise HarnessError("uvicorn has no trio worker class; use server = \"hypercorn\"")
        # a pinned environment's older uvicorn (0.21, seed 004's) has no --timeout-graceful-shutdown:
        # it stops when its connections close, or at the stack's SIGKILL
        flag = "--timeout-graceful-shutdown"
        graceful = [flag, "1"] if _uvicorn_option(str(python), flag) else []
        return [str(python), "-m", "uvicorn", APP, "--host", "127.0.0.1", "--port", str(port),
                "--workers", workers, "--loop", loop, "--http", "httptools", "--no-access-log",
                "--log-level", "warning", *graceful]
    if server == "hypercorn":
        return [str(python), "-m", "hypercorn", APP, "--bind", f"127.0.0.1:{port}", "--workers", workers,
                "--worker-class", loop, "--graceful-timeout", "1", "--log-level", "WARNING"]
    if loop == "trio":
        raise HarnessError("granian has no trio loop; use server = \"hypercorn\"")
    return [str(python), "-m", "granian", "--interface", "asgi", "--host", "127.0.0.1", "--port", str(port),
            "--workers", workers, "--loop", loop, "--no-access-log", "--log-level", "warning",
            "--workers-kill-timeout", "1", APP]

def load_spec(params: dict[str, Any], *, id_prefix: str = "") -> LoadSpec:
    return LoadSpec(
        model=params.get("model", "closed"), users=params.get("users", 100), rate=params.get("rate"),
        ramp_per_s=params.get("ramp", 10.0), pace=params.get("pace"), keepalive=params.get("keepalive", True),
        requests=params.get("requests"),
        duration=params.get("duration"), processes=params.get("driver_processes", 1),
        timeout=params.get("timeout", 30.0), id_prefix=id_prefix,
    )

def run_case(case: Case, python: Path, out_dir: Path, placement: Placement, say: Say) -> HttpCase:
    params = case.params
    port = free_port()
    logs = out_dir / "logs" / f"{case.index}"
    stats_dir = logs / "stats"
    stats_dir.mkdir(parents=True, exist_ok=True)
    env = {
        "TASKBENCH_APP_DELAY": str(params.get("delay", 0.05)),
        "TASKBENCH_APP_MIDDLEWARE": params.get("middleware", "none"),
        "TASKBENCH_APP_LAYERS": str(params.get("layers", 0)),
        "TASKBENCH_APP_MIDDLEWARE_WORK": params.get("middleware_work", "pass"),
        "TASKBENCH_APP_MIDDLEWARE_SLEEP": str(params.get("middleware_sleep", 0.01)),
        "TASKBENCH_APP_THREAD_LIMIT": str(params.get("thread_limit", 0)),
        "TASKBENCH_APP_THREAD_LIMIT_VIA": params.get("thread_limit_via", "limiter"),
        "TASKBENCH_APP_STATS_DIR": str(stats_dir),
        "PYTHONUNBUFFERED": "1",
        # a pinned environment holds the article's libraries, not taskbench: its app comes from src/
        **({} if params.get("environment", "servers") == "servers" else {"PYTHONPATH": pinned_pythonpath()}),
    }
    argv = server_argv(python, params, port)
    template = RequestTemplate(host="127.0.0.1", port=port, path=ROUTES[params["endpoint"]], method="GET")
    spec = load_spec(params)
    result = HttpCase(index=case.index, label=case.label, params=params, server_argv=argv[1:])
    server_name = params.get("server", "uvicorn")
    stack = Stack({**os.environ, **env}, name=f"{out_dir.name}-{case.index}", stop_timeout=5.0)
    try:
        with stack:
            server = stack.start("server", argv, logs / "server.log", role="server", cpus=placement.api)
            stack.wait_ready(lambda: healthy(port), timeout=60,
                             what=f"the {server_name} server to answer /health ({logs})")
            if int(params.get("server_workers", 1)) > 1:
                # /health answered by one worker; the others bind within moments
                wait_until(lambda: len(_children(server.pid)) >= int(params["server_workers"]), 5,
                           raise_on_timeout=False)
            stack.limit(case.limits, lambda text: say(f"[{case.label}] {text}"))
            with pinned(placement.driver):
                warmup = int(params.get("warmup", 0))
                if warmup:
                    run_load(template, LoadSpec(users=min(spec.users, 10), requests=warmup,
                                                timeout=spec.timeout, id_prefix="w"))
                cpu0 = tree_cpu(server.pid)
                # seed 004's netstat: the connections a server holds beyond the requests it serves
                with stack.measure() as window, Peaks(lambda: {"server": established(port)},
                                                      interval=CONNECTIONS_INTERVAL, name="connections") as connections:
                    load = run_load(template, spec)
                result.processes = window.processes
                cpu1 = tree_cpu(server.pid)
            result.limits = stack.limit_records()
        result.exit_codes = dict(stack.exit_codes)
    finally:
        write_log = stats_dir / "middleware.log"
        if write_log.exists():
            write_log.unlink()  # the seed's blocking writes: megabytes of nothing
    peaks = _peaks(stats_dir)
    result.load = load.to_model(failed_sample=10)
    data = result.load
    requests = max(1, data.requests)
    result.summary = Summary(
        requests=data.requests, rps=data.rps, p50_ms=data.latency_ms.p50, p95_ms=data.latency_ms.p95,
        p99_ms=data.latency_ms.p99, errors_pct=100.0 * (requests - data.ok) / requests,
        concurrency=sum(p["peak"] for p in peaks) if peaks else None, server_processes_seen=len(peaks),
        threads_seen=sum(int(p.get("thread_ids", 0)) for p in peaks) if peaks else None,
        connections_peak=connections.most.get("server"),
        server_cpu_s=cpu1 - cpu0 if cpu0 is not None and cpu1 is not None else None,
        driver_cpu_pct=100.0 * data.max_utilization, driver_saturated=data.saturated,
        max_users=max((row.users for row in data.per_second), default=spec.users),
        peak_rps=peak_rps([row.model_dump() for row in data.per_second]),
    )
    result.series = [SeriesPoint(t=r.t, users=r.users, rps=r.completed, errors=r.errors) for r in data.per_second]
    if not data.ok:  # a failed status names its reason
        result.failures = [*result.failures, f"none of the {data.requests} requests got a 2xx answer"
                           if data.requests else "the load sent no request"]
    result.status = "failed" if result.failures else "ok"
    if result.summary.errors_pct and result.status == "ok":
        result.status = "errors"
    shutil.rmtree(stats_dir, ignore_errors=True)
    return result

def _children(pid: int) -> list[int]:
    import psutil

    try:
        return [c.pid for c in psutil.Process(pid).children()]
    except psutil.NoSuchProcess:
        return []

def peak_rps(per_second: list[dict[str, Any]], window: int = 3) -> float | None:
    """The best rate of successful responses over ``window`` consecutive seconds.

    Under a ramp the mean RPS mixes the quiet start with the saturated end; the article's figures
    ("stalled near 700 req/s") are the plateau, which this is.
    """
    ok = [int(row.get("ok", row.get("completed", 0))) for row in per_second]
    if not ok:
        return None
    if len(ok) < window:
        return sum(ok) / len(ok)
    return max(sum(ok[i:i + window]) / window for i in range(len(ok) - window + 1))

def _peaks(stats_dir: Path) -> list[dict[str, Any]]:
    import json

    out = []
    for path in stats_dir.glob("*.json"):
        try:
            out.append(json.loads(path.read_text()))
        except (OSError, ValueError):
            continue
    return out

