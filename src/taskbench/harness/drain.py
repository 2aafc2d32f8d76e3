"""``taskbench drain``: per backend, one worker's drain rate, ledger on and off, and the ledger's ratio."""

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
    output: Path, say: Callable[[str], None] = print, workload: str = "io/simple", repeat: int = 1,
) -> list[dict[str, Any]]:
    """Per backend, ``repeat`` rounds of a drain per ledger mode, the modes alternating within a round
    (on a shared machine a slow stretch then hits both modes, and ``ledger_ratios`` takes medians)."""
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
            cases = [(r, m) for r in range(repeat) for m in (ledger_modes[::-1] if r % 2 else ledger_modes)]
            for round_, ledger in cases:
                run_id = f"drain-{uuid.uuid4().hex[:10]}"
                env = {**os.environ, "TASKBENCH_BACKEND": name, "TASKBENCH_REDIS_URL": url,
                       "TASKBENCH_BROKER_URL": redis.broker_url,
                       "TASKBENCH_RUN_ID": run_id, "TASKBENCH_LEDGER": str(ledger).lower(),
                       "TASKBENCH_CONCURRENCY": str(concurrency), "PYTHONUNBUFFERED": "1"}
                say(f"[{name}] {tasks} {workload} tasks, ledger {'on' if ledger else 'off'}")
                log = out / f"drain-case-{name}-{'ledger' if ledger else 'noledger'}-{round_}.log"
                with progress.phase(f"[{name}] enqueue and drain, ledger {'on' if ledger else 'off'}"), \
                        Stack(env, name=run_id, stop_timeout=30) as stack:
                    case = stack.start("drain-case", [str(python), "-m", "taskbench", "drain-case", "--tasks",
                                                      str(tasks), "--log-dir", str(out),
                                                      "--workload", workload], log)
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
                row["round"] = round_
                rows.append(row)
    (out / "drain.json").write_text(json.dumps(rows, indent=1))
    return rows


def ledger_ratios(rows: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per backend: drain rates with the ledger on and off, and ``ratio`` = on ÷ off (1.0: free).

    The rate of a round is its steady rate (10 % to 90 % of the tasks executed) where it has one, else
    all tasks over the whole drain; each mode's figure is the median of its rounds."""
    import statistics

    out: dict[str, dict[str, Any]] = {}
    for row in rows:
        entry = out.setdefault(row["backend"], {"version": row.get("version"), "workload": row.get("workload"),
                                                "rounds_on": [], "rounds_off": []})
        entry["rounds_on" if row["ledger"] else "rounds_off"].append(row.get("steady_per_s") or row["drain_per_s"])
    for entry in out.values():
        on = entry["on"] = statistics.median(entry["rounds_on"]) if entry["rounds_on"] else None
        off = entry["off"] = statistics.median(entry["rounds_off"]) if entry["rounds_off"] else None
        entry["ratio"] = on / off if on and off else None
    return out


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
