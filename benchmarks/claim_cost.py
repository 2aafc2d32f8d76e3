"""What the task-id claim costs: API and Redis CPU per request with ``TASKBENCH_IDEMPOTENCY`` on and off.

CPU time per request is steadier than requests per second on a shared machine. For each backend and
setting it starts a private Redis (core 1) and the API alone (core 0, no worker: tasks wait in the
broker), drives it with the project's load driver (warm-up, then ``--requests`` at 50 users) and
reads both processes' CPU time around the load. One JSON line per run.

    .venv/bin/python benchmarks/claim_cost.py --backends faststream,celery,background --reps 3
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import uuid
from pathlib import Path
from typing import Any

import psutil
import redis

from taskbench.driver import LoadSpec, RequestTemplate, run_load
from taskbench.harness.brokers.redis import EmbeddedRedis
from taskbench.harness.processes.envs import ensure_env
from taskbench.harness.processes.stack import Stack
from taskbench.net import free_port, healthy


def _cpu(proc: psutil.Process) -> float:
    times = proc.cpu_times()
    return float(times.user + times.system)


def measure(backend: str, idempotency: bool, server: EmbeddedRedis, logs: Path, requests: int) -> dict[str, Any]:
    run_id = f"claim-cost-{uuid.uuid4().hex[:8]}"
    port = free_port()
    env = {**os.environ, "TASKBENCH_BACKEND": backend, "TASKBENCH_REDIS_URL": server.url,
           "TASKBENCH_RUN_ID": run_id, "TASKBENCH_IDEMPOTENCY": str(idempotency).lower()}
    python = str(ensure_env(backend, quiet=True))
    try:
        with Stack(env, name=run_id, stop_timeout=10) as stack:
            api = stack.start("api", [python, "-m", "taskbench", "serve", "--port", str(port)],
                              logs / f"{run_id}.log", cpus=[0])
            stack.wait_ready(lambda: healthy(port), timeout=60, what=f"the API (log: {logs / run_id}.log)")
            template = RequestTemplate(host="127.0.0.1", port=port, path=f"/api/v1/incr/io/simple/{backend}",
                                       body='{{"value":1,"task_id":"{task_id}","enqueued_at":{enqueued_at}}}')
            run_load(template, LoadSpec(users=20, requests=300, id_prefix="w"))
            api_proc, redis_proc = psutil.Process(api.pid), psutil.Process(server.proc.pid)
            api_before, redis_before = _cpu(api_proc), _cpu(redis_proc)
            result = run_load(template, LoadSpec(users=50, requests=requests))
            api_used, redis_used = _cpu(api_proc) - api_before, _cpu(redis_proc) - redis_before
    finally:
        client = redis.Redis.from_url(server.url)
        keys = list(client.scan_iter(match=f"taskbench:{run_id}:*"))
        if keys:
            client.unlink(*keys)
        client.close()
    return {"backend": backend, "idempotency": idempotency, "ok": result.ok, "errors": result.errors,
            "rps": round(result.rps), "api_cpu_us": round(api_used / requests * 1e6, 1),
            "redis_cpu_us": round(redis_used / requests * 1e6, 1), "p50_ms": result.latency.summary()["p50"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backends", default="faststream,celery,background")
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--requests", type=int, default=4000)
    parser.add_argument("--logs", type=Path, default=Path("results/claim-cost"))
    args = parser.parse_args()
    args.logs.mkdir(parents=True, exist_ok=True)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))  # stop the API and Redis on the way out
    server = EmbeddedRedis(args.logs / "redis.log", cpus=[1])
    server.start(dict(os.environ))
    try:
        for rep in range(args.reps):
            for backend in args.backends.split(","):
                for idempotency in (True, False):
                    row = measure(backend, idempotency, server, args.logs, args.requests)
                    print(json.dumps({"rep": rep, **row}), flush=True)
    finally:
        server.stop()


if __name__ == "__main__":
    main()
