"""``taskbench drain``: per backend, one worker's drain rate on no-op tasks, ledger on and off."""

from __future__ import annotations

import json
import os
import subprocess
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from taskbench import backends
from taskbench.harness import HarnessError, progress
from taskbench.harness.envs import ensure_env, versions
from taskbench.harness.redis_server import provide_redis


def run_drain(
    names: list[str], *, tasks: int, concurrency: int, ledger_modes: list[bool], redis_url: str | None,
    output: Path, say: Callable[[str], None] = print,
) -> list[dict[str, Any]]:
    out = output / f"drain-{uuid.uuid4().hex[:8]}"
    out.mkdir(parents=True, exist_ok=True)
    rows: list[dict[str, Any]] = []
    with provide_redis(redis_url, out, say=say) as (url, _):
        for name in names:
            meta = backends.info(name)
            if not meta.has_worker:
                say(f"[{name}] skipped: no worker process, nothing to drain")
                continue
            python = ensure_env(meta.extra)
            for ledger in ledger_modes:
                run_id = f"drain-{uuid.uuid4().hex[:10]}"
                env = {**os.environ, "TASKBENCH_BACKEND": name, "TASKBENCH_REDIS_URL": url,
                       "TASKBENCH_RUN_ID": run_id, "TASKBENCH_LEDGER": str(ledger).lower(),
                       "TASKBENCH_CONCURRENCY": str(concurrency), "PYTHONUNBUFFERED": "1"}
                say(f"[{name}] {tasks} no-op tasks, ledger {'on' if ledger else 'off'}")
                with progress.phase(f"[{name}] enqueue and drain, ledger {'on' if ledger else 'off'}"):
                    proc = subprocess.run(
                        [str(python), "-m", "taskbench", "drain-case", "--tasks", str(tasks),
                         "--log-dir", str(out)],
                        env=env, capture_output=True, text=True, timeout=1200, check=False,
                    )
                _cleanup(url, run_id, meta)
                if proc.returncode != 0:
                    raise HarnessError(f"drain of {name} failed: {proc.stderr.strip()[-800:]}")
                row = json.loads(proc.stdout.strip().splitlines()[-1])
                packages: Any = versions(str(python)).get("packages", {})
                row["version"] = packages.get(name)
                rows.append(row)
    (out / "drain.json").write_text(json.dumps(rows, indent=1))
    return rows


def _cleanup(url: str, run_id: str, meta: backends.BackendInfo) -> None:
    import redis

    client = redis.Redis.from_url(url)
    try:
        for pattern in [f"taskbench:{run_id}:*", *meta.owned_key_patterns(run_id)]:
            keys = list(client.scan_iter(match=pattern, count=1000))
            for i in range(0, len(keys), 1000):
                client.unlink(*keys[i:i + 1000])
    finally:
        client.close()
