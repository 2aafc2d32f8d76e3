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
from taskbench.harness.config import Placement
from taskbench.harness.envs import ensure_env, versions
from taskbench.harness.keys import delete_run_keys
from taskbench.harness.processes import Managed
from taskbench.harness.redis_server import RunRedis, provide_redis
from taskbench.harness.stack import Stack


def run_drain(
    names: list[str], *, tasks: int, concurrency: int, ledger_modes: list[bool], redis_url: str | None,
    output: Path, say: Callable[[str], None] = print, workload: str = "io/simple", repeat: int = 1,
    placement: Placement | None = None,
) -> list[dict[str, Any]]:
    """Per backend, ``repeat`` rounds of a drain per ledger mode, the modes alternating within a round
    (on a shared machine a slow stretch then hits both modes, and ``ledger_ratios`` takes medians).

    ``placement``: the worker on ``workers``' cores, the Redis servers on ``redis``', the process that
    enqueues and watches the drain on ``driver``'s (see :func:`drain_placement`)."""
    placement = placement or Placement()
    out = output / f"drain-{uuid.uuid4().hex[:8]}"
    out.mkdir(parents=True, exist_ok=True)
    rows: list[dict[str, Any]] = []
    with provide_redis(redis_url, out, cpus=placement.redis, say=say) as redis:
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
                    argv = [str(python), "-m", "taskbench", "drain-case", "--tasks", str(tasks),
                            "--log-dir", str(out), "--workload", workload,
                            "--worker-cpus", ",".join(map(str, placement.workers or []))]
                    case = stack.start("drain-case", argv, log, cpus=placement.driver)
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


def drain_placement(text: str) -> Placement:
    """``auto``: the worker alone on the first usable core, everything else (the Redis servers, the
    process that enqueues and polls) on the others, so that the worker's rate is not shared with them
    and moves less between rounds; ``off``; or roles as for ``run --pin`` (workers, redis, driver)."""
    import os

    if text.strip() != "auto":
        return Placement.parse(text)
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2:
        return Placement()
    return Placement(workers=cpus[:1], redis=cpus[1:], driver=cpus[1:])


def ledger_ratios(rows: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per backend: drain rates with the ledger on and off, and ``ratio`` = on ÷ off (1.0: free).

    The rate of a round is its steady rate (10 % to 90 % of the tasks executed) where it has one, else
    all tasks over the whole drain; each mode's figure is the median of its rounds. The worker's CPU per
    task over the same interval gives ``cpu_ratio`` = off ÷ on, in the same sense (1.0: free; below: the
    ledger costs the worker that share), which holds even when the worker's core was not what limited
    the rate."""
    import statistics

    def median(values: list[float]) -> float | None:
        return statistics.median(values) if values else None

    out: dict[str, dict[str, Any]] = {}
    for row in rows:
        entry = out.setdefault(row["backend"], {"version": row.get("version"), "workload": row.get("workload"),
                                                "rounds_on": [], "rounds_off": [], "cpu_rounds_on": [],
                                                "cpu_rounds_off": []})
        mode = "on" if row["ledger"] else "off"
        entry[f"rounds_{mode}"].append(row.get("steady_per_s") or row["drain_per_s"])
        if row.get("worker_cpu_us_per_task"):
            entry[f"cpu_rounds_{mode}"].append(row["worker_cpu_us_per_task"])
    for entry in out.values():
        on = entry["on"] = median(entry["rounds_on"])
        off = entry["off"] = median(entry["rounds_off"])
        entry["ratio"] = on / off if on and off else None
        cpu_on = entry["cpu_on_us_per_task"] = median(entry["cpu_rounds_on"])
        cpu_off = entry["cpu_off_us_per_task"] = median(entry["cpu_rounds_off"])
        entry["cpu_ratio"] = cpu_off / cpu_on if cpu_on and cpu_off else None
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
