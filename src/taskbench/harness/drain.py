"""``taskbench drain``: per backend, one worker's drain rate on no-op tasks, ledger on and off."""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

from taskbench import backends
from taskbench.harness import HarnessError, progress
from taskbench.harness.envs import ensure_env, versions
from taskbench.harness.keys import delete_run_keys
from taskbench.harness.processes import Managed
from taskbench.harness.redis_server import RunRedis, provide_redis
from taskbench.harness.stack import Stack


def run_drain(
    names: list[str], *, tasks: int, concurrency: int, ledger_modes: list[bool], redis_url: str | None,
    output: Path, say: Callable[[str], None] = print,
) -> list[dict[str, Any]]:
    out = output / f"drain-{uuid.uuid4().hex[:8]}"
    out.mkdir(parents=True, exist_ok=True)
    rows: list[dict[str, Any]] = []
    with provide_redis(redis_url, out, say=say) as redis:
        url = redis.url
        for name in names:
            meta = backends.info(name)
            if not meta.has_worker:
                say(f"[{name}] skipped: no worker process, nothing to drain")
                continue
            python = ensure_env(meta.extra)
            for ledger in ledger_modes:
                run_id = f"drain-{uuid.uuid4().hex[:10]}"
                env = {**os.environ, "TASKBENCH_BACKEND": name, "TASKBENCH_REDIS_URL": url,
                       "TASKBENCH_BROKER_URL": redis.broker_url,
                       "TASKBENCH_RUN_ID": run_id, "TASKBENCH_LEDGER": str(ledger).lower(),
                       "TASKBENCH_CONCURRENCY": str(concurrency), "PYTHONUNBUFFERED": "1"}
                say(f"[{name}] {tasks} no-op tasks, ledger {'on' if ledger else 'off'}")
                log = out / f"drain-case-{name}-{'ledger' if ledger else 'noledger'}.log"
                with progress.phase(f"[{name}] enqueue and drain, ledger {'on' if ledger else 'off'}"), \
                        Stack(env, name=run_id, stop_timeout=30) as stack:
                    case = stack.start("drain-case", [str(python), "-m", "taskbench", "drain-case", "--tasks",
                                                      str(tasks), "--log-dir", str(out)], log)
                    stack.wait_ready(partial(_exited, case), timeout=1200, interval=0.2,
                                     what=f"the drain of {name} to finish (log: {log})")
                    code = case.exit_code()
                _cleanup(redis, run_id, meta)
                lines = log.read_text(errors="replace").strip().splitlines()
                if code != 0 or not lines or not lines[-1].startswith("{"):
                    raise HarnessError(f"drain of {name} failed (exit {code}): " + "\n".join(lines[-10:]))
                row = json.loads(lines[-1])
                packages: Any = versions(str(python)).get("packages", {})
                row["version"] = packages.get(name)
                rows.append(row)
    (out / "drain.json").write_text(json.dumps(rows, indent=1))
    return rows


def _exited(proc: Managed) -> bool:
    return not proc.alive()


def _cleanup(servers: RunRedis, run_id: str, meta: backends.BackendInfo) -> None:
    import redis

    client = redis.Redis.from_url(servers.url)
    broker = None if servers.shared else redis.Redis.from_url(servers.broker_url)
    try:
        delete_run_keys(client, run_id, meta, broker)
    finally:
        client.close()
        if broker is not None:
            broker.close()
