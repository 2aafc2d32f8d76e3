"""``taskbench ceiling``: the same load and placement as ``run``, against the bare FastAPI + INCR app."""

from __future__ import annotations

import os
import sys
import time
import uuid
from pathlib import Path
from typing import Any

from taskbench.driver import RequestTemplate, run_load
from taskbench.harness import HarnessError
from taskbench.harness.config import RunConfig
from taskbench.harness.pinning import pinned
from taskbench.harness.processes import ProcessSet
from taskbench.harness.redis_server import provide_redis
from taskbench.net import free_port, healthy


def measure_ceiling(config: RunConfig) -> dict[str, Any]:
    """Start Redis (or use the named one) and the ceiling app; drive it; return the load result."""
    run_id = f"ceiling-{uuid.uuid4().hex[:8]}"
    out = Path(config.output) / run_id
    out.mkdir(parents=True, exist_ok=True)
    with provide_redis(config.redis_url, out, cpus=config.placement.redis) as (url, _):
        try:
            data = _drive(config, url, run_id, out)
        finally:
            import redis

            client = redis.Redis.from_url(url)
            client.delete(f"taskbench:{run_id}:ceiling")
            client.close()
    data.pop("accepted_ids", None)
    data.pop("failed_ids", None)
    return data


def _drive(config: RunConfig, url: str, run_id: str, out: Path) -> dict[str, Any]:
    port = config.api_port or free_port()
    env = {**os.environ, "TASKBENCH_REDIS_URL": url, "TASKBENCH_RUN_ID": run_id}
    code = (
        "import uvicorn; uvicorn.run('taskbench.service.baseline:create_app', factory=True, "
        f"host='127.0.0.1', port={port}, loop='uvloop', http='httptools', access_log=False, "
        "log_level='warning')"
    )
    with ProcessSet(env, stop_timeout=config.stop_timeout) as procs:
        api = procs.start("ceiling-api", [sys.executable, "-c", code], out / "api.log",
                          cpus=config.placement.api)
        deadline = time.monotonic() + config.startup_timeout
        while not healthy(port):
            if not api.alive() or time.monotonic() > deadline:
                raise HarnessError(f"the ceiling app did not start: {api.tail()}")
            time.sleep(0.05)
        template = RequestTemplate(host="127.0.0.1", port=port, path="/api/v1/incr", body="{{}}")
        with pinned(config.placement.driver):
            if config.warmup:
                run_load(template, type(config.load)(users=10, requests=config.warmup))
            return run_load(template, config.load).to_dict()
