"""Seed 003: Celery's execution pools, as real ``celery worker`` processes, on a local delay server.

For each case: start the delay server and the worker(s) (``-P POOL -c N -Q queues``), wait until
every worker announced itself ready, apply the ``workers`` limits if any, run the probe (which
enqueues the tasks and waits until each ran), measure the workers' CPU time, stop everything, delete
the case's keys. ``test = "routing"`` with ``io_pool`` set starts the article's two workers: one on
queue ``io`` with ``io_pool``/``io_concurrency``, one on queue ``cpu`` with ``pool``/``concurrency``;
without ``io_pool`` one worker with ``pool`` consumes both queues.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Callable
from pathlib import Path

from taskbench.harness import HarnessError
from taskbench.harness.processes.cgroups import tree_cpu
from taskbench.harness.processes.stack import Stack
from taskbench.net import free_port
from taskbench.results import CeleryCase, Summary
from taskbench.scenarios.parse import Case

Say = Callable[[str], None]

# the article's concurrency per pool: one process per core for prefork (4 there), 100 green threads
DEFAULT_CONCURRENCY = {"prefork": 4, "solo": 1, "threads": 100, "gevent": 100, "eventlet": 100}


def worker_argv(python: Path, pool: str, concurrency: int, queues: str, name: str) -> list[str]:
    """The worker's command line; ``concurrency`` 0 leaves ``-c`` out (Celery's default: the cores, for prefork)."""
    size = ["-c", str(concurrency)] if concurrency else []
    return [str(python), "-m", "celery", "-A", "taskbench.scenarios.celery_app", "worker", "-P", pool, *size,
            "-Q", queues, "-n", f"{name}@%h", "--without-gossip", "--without-mingle", "--without-heartbeat",
            "-l", "WARNING"]


def run_case(case: Case, python: Path, redis_url: str, out_dir: Path, run_id: str, say: Say) -> CeleryCase:
    import redis

    p = case.params
    prefix = f"taskbench:{run_id}-{case.index}:"
    port = free_port()
    logs = out_dir / "logs" / f"{case.index}"
    env = {**os.environ, "TASKBENCH_CELERY_URL": redis_url, "TASKBENCH_CELERY_PREFIX": prefix,
           "TASKBENCH_CELERY_SERVER": f"http://127.0.0.1:{port}/", "PYTHONUNBUFFERED": "1"}
    pool = p["pool"]
    concurrency = int(p.get("concurrency", DEFAULT_CONCURRENCY[pool]))
    workers: list[tuple[str, list[str]]]
    if p["test"] == "routing" and p.get("io_pool"):
        io_concurrency = int(p.get("io_concurrency", DEFAULT_CONCURRENCY[p["io_pool"]]))
        workers = [("io", worker_argv(python, p["io_pool"], io_concurrency, "io", "io")),
                   ("cpu", worker_argv(python, pool, concurrency, "cpu", "cpu"))]
    else:
        workers = [("worker", worker_argv(python, pool, concurrency, "io,cpu", "worker"))]
    result = CeleryCase(worker_argv=[argv[3:] for _, argv in workers],
                        label=None if "label" in p else f"{p['test']}, {pool} {concurrency or 'default'}")
    client = redis.Redis.from_url(redis_url)
    timeout = float(p.get("timeout", 120.0))
    stack = Stack(env, name=f"{run_id}-{case.index}", stop_timeout=10.0)
    try:
        with stack:
            stack.start("delay-server", [str(python), "-m", "taskbench.scenarios.delay_server", "--port", str(port),
                                         "--delay", str(p.get("delay", 2.0))], logs / "delay-server.log")
            started = [stack.start(name, argv, logs / f"{name}.log", role="workers") for name, argv in workers]
            stack.wait_ready(lambda: int(client.hlen(f"{prefix}ready")) >= len(started), timeout=60,
                             what=f"the celery worker(s) to be ready (logs in {logs})")
            stack.limit(case.limits, lambda text: say(f"[{result.label or case.label}] {text}"))
            cpu0 = [tree_cpu(w.pid) or 0.0 for w in started]
            with stack.measure() as window:
                probe = subprocess.run([str(python), "-m", "taskbench.scenarios.celery_probe", json.dumps(p)],
                                       env=env, capture_output=True, text=True, timeout=timeout + 60, check=False)
            result.processes = window.processes
            cpu1 = [tree_cpu(w.pid) or 0.0 for w in started]
            (logs / "probe.log").write_text(probe.stdout + probe.stderr)
            if probe.returncode != 0:
                raise HarnessError(f"the celery probe failed (exit {probe.returncode}): "
                                   f"{probe.stderr.strip().splitlines()[-1] if probe.stderr.strip() else ''}")
            result.limits = stack.limit_records()
        result.exit_codes = dict(stack.exit_codes)
    finally:
        keys = list(client.scan_iter(match=f"{prefix}*", count=1000))
        if keys:
            client.unlink(*keys)
        client.close()
    data = json.loads(probe.stdout.strip().splitlines()[-1])
    tasks = int(data["expected"])
    elapsed = float(data["elapsed_s"])
    result.probe = data
    result.summary = Summary(
        tasks=tasks, elapsed_s=elapsed, tasks_per_s=tasks / elapsed if elapsed > 0 else None,
        cpu_s=sum(b - a for a, b in zip(cpu0, cpu1, strict=True)), max_parallel=data["max_parallel"],
        lost=data["lost"], duplicated=data["duplicated"],
    )
    say(f"[{result.label or case.label}] before the first task finished, the worker(s) had received "
        f"{data['received_before_first_finish']} task(s) and started {data['started_before_first_finish']}")
    raised: dict[str, int] = data.get("errors", {})
    for message, count in raised.items():
        say(f"[{result.label or case.label}] {count} task(s) raised {message}")
    if raised:  # what the case measures (seed 000's claim 14): a figure, as a queue case's failed tasks
        result.summary.failed = sum(raised.values())
        result.summary.failed_types = {}
        for message, count in raised.items():
            kind = message.split(":", 1)[0]
            result.summary.failed_types[kind] = result.summary.failed_types.get(kind, 0) + count
    if data["timed_out"]:
        result.failures.append(f"only {data['executed']} of {tasks} tasks ran within {timeout:.0f} s")
    if data["duplicated"]:
        result.failures.append(f"{data['duplicated']} task(s) ran more than once")
    result.status = "failed" if result.failures else "errors" if raised else "ok"
    return result
