"""``taskbench ceiling``: the same load and placement as ``run``, against the bare FastAPI + INCR app."""

from __future__ import annotations

import os
import sys
import uuid
from pathlib import Path

from taskbench.driver import RequestTemplate, run_load
from taskbench.harness.brokers.redis import provide_redis
from taskbench.harness.config import RunConfig
from taskbench.harness.processes.pinning import pinned
from taskbench.harness.processes.stack import Stack
from taskbench.net import free_port, healthy
from taskbench.results import Load


def measure_ceiling(config: RunConfig) -> Load:
    """Start Redis (or use the named one) and the ceiling app; drive it; return the load result."""
    run_id = f"ceiling-{uuid.uuid4().hex[:8]}"
    out = Path(config.output) / run_id
    out.mkdir(parents=True, exist_ok=True)
    with provide_redis(config.redis_url, out, cpus=config.placement.redis) as servers:
        url = servers.url
        try:
            return _drive(config, url, run_id, out)
        finally:
            import redis

            client = redis.Redis.from_url(url)
            client.delete(f"taskbench:{run_id}:ceiling")
            client.close()


def _drive(config: RunConfig, url: str, run_id: str, out: Path) -> Load:
    port = config.api_port or free_port()
    env = {**os.environ, "TASKBENCH_REDIS_URL": url, "TASKBENCH_RUN_ID": run_id}
    code = (
        "import uvicorn; uvicorn.run('taskbench.service.baseline:create_app', factory=True, "
        f"host='127.0.0.1', port={port}, loop='uvloop', http='httptools', access_log=False, "
        "log_level='warning')"
    )
    with Stack(env, name=run_id, stop_timeout=config.stop_timeout) as stack:
        stack.start("ceiling-api", [sys.executable, "-c", code], out / "api.log", cpus=config.placement.api)
        stack.wait_ready(lambda: healthy(port), timeout=config.startup_timeout,
                         what=f"the ceiling app to answer /health (log: {out / 'api.log'})")
        template = RequestTemplate(host="127.0.0.1", port=port, path="/api/v1/incr", body="{{}}")
        with pinned(config.placement.driver):
            if config.warmup:
                run_load(template, type(config.load)(users=10, requests=config.warmup))
            return run_load(template, config.load).to_model()
