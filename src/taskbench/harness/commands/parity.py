"""``taskbench parity``: each library's own published no-op drain benchmark, rewritten as a script of
the same shape (:mod:`taskbench.published`), beside ``taskbench drain --workload noop`` with the same task
count and concurrency, ledger off and on; both started here, on one private Redis, the runs interleaved.

A round runs the script, the drain ledger off and the drain ledger on one after the other, the order
reversed every other round (script, off, on; on, off, script; ...), so that a slow stretch of a shared
machine falls on every kind of run alike; the report takes medians with their ranges
(:mod:`taskbench.report.parity`).
"""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from taskbench import backends
from taskbench.backends.shapes import Shape, Source
from taskbench.files import write_atomic
from taskbench.harness import HarnessError, progress
from taskbench.harness.brokers.redis import RunRedis, provide_redis
from taskbench.harness.commands.drain import _drain_backend, drain_placement
from taskbench.harness.config import Placement
from taskbench.harness.keys import delete_run_keys
from taskbench.harness.processes.envs import ensure_env, ensure_pinned, environment_key, pinned_backends, versions
from taskbench.harness.processes.stack import Stack

Say = Callable[[str], None]
#: a published script's exit when the library raised (its last line names the error: taskbench.backends._published)
SCRIPT_FAILED = 3
#: the kinds of run of a round, in the order of its even rounds (odd rounds run them backwards)
KINDS = ("script", "off", "on")


def run_parity(sources: list[Source], *, rounds: int, output: Path, libraries: list[str] | None = None,
               tasks: int | None = None, ledger: tuple[bool, ...] = (False, True), timeout: float = 600.0,
               pin: str = "auto", versions_set: str = "lock", say: Say = print) -> dict[str, Any]:
    """Every shape of ``sources`` (only ``libraries``' when given), ``rounds`` interleaved rounds each;
    ``tasks`` replaces the published task counts (a quicker, smaller run); ``ledger``: the drain's
    modes (none: the script alone); ``versions_set``: ``lock`` (each library's environment from uv.lock)
    or a pinned environment (``pinned/<name>/``: an article's versions) that holds every library chosen.
    Returns (and writes as ``parity.json``) the rows of every run with the sources they mirror."""
    placement = drain_placement(pin)
    if versions_set != "lock":
        held = pinned_backends(versions_set)  # a ValueError naming the known sets for an unknown one
        chosen = {s.library for source in sources for s in source.shapes if not libraries or s.library in libraries}
        missing = sorted(chosen - set(held))
        if missing:
            raise ValueError(f"the pinned environment {versions_set!r} holds {', '.join(held) or 'no queue library'}, "
                             f"not {', '.join(missing)}")
    out = output / f"parity-{uuid.uuid4().hex[:8]}"
    out.mkdir(parents=True, exist_ok=True)
    kinds = ["script"] + [("on" if mode else "off") for mode in ledger]
    rows: list[dict[str, Any]] = []
    environments: dict[str, Any] = {}
    result: dict[str, Any] = {"sources": [_source_record(s) for s in sources], "rounds": rounds,
                              "versions": versions_set,
                              "tasks_override": tasks, "rows": rows, "environments": environments,
                              "folder": str(out)}
    with provide_redis(None, out, cpus=placement.redis, say=say) as redis:
        for source in sources:
            for shape in source.shapes:
                if libraries and shape.library not in libraries:
                    continue
                meta = backends.info(shape.library)
                python = ensure_env(meta.extra) if versions_set == "lock" else ensure_pinned(versions_set)
                environments.setdefault(environment_key(meta.extra, versions_set), versions(str(python)))
                count = tasks or shape.tasks
                for round_ in range(rounds):
                    for kind in (kinds if round_ % 2 == 0 else kinds[::-1]):
                        where = f"[{source.name}/{shape.library}] round {round_ + 1} of {rounds}"
                        with progress.phase(f"{where}: {kind}"):
                            row = (_script(shape, count, python, redis, meta, out, placement, timeout, say)
                                   if kind == "script" else
                                   _drain(shape, count, kind == "on", python, redis, meta, out, placement, say))
                        rows.append({"source": source.name, "library": shape.library, "round": round_,
                                     "kind": kind, "tasks": count, **row})
                        write_atomic(out / "parity.json", json.dumps(result, indent=1))
    return result


def _source_record(source: Source) -> dict[str, Any]:
    return {"name": source.name, "repo": source.repo, "commit": source.commit, "results": source.results,
            "setup": source.setup,
            "shapes": [{"library": s.library, "tasks": s.tasks, "concurrency": s.concurrency,
                        "enqueue": s.enqueue, "parallel": s.parallel, "timing": s.timing, "options": s.options,
                        "mirrors": s.mirrors, "published_s": s.published_s, "published_per_s": s.published_per_s,
                        "note": s.note} for s in source.shapes]}


def script_argv(shape: Shape, tasks: int, python: Path, redis_url: str, prefix: str, timeout: float) -> list[str]:
    """The command line of ``shape``'s script in the library's environment."""
    argv = [str(python), "-m", backends.info(shape.library).published, "--redis-url", redis_url,
            "--prefix", prefix, "--tasks", str(tasks), "--concurrency", str(shape.concurrency),
            "--enqueue", shape.enqueue, "--parallel", str(shape.parallel), "--timing", shape.timing,
            "--timeout", f"{timeout:g}"]
    for name, value in shape.options.items():
        argv += ["--option", f"{name}={value}"]
    return argv


def _script(shape: Shape, tasks: int, python: Path, redis: RunRedis, meta: backends.BackendInfo, out: Path,
            placement: Placement, timeout: float, say: Say) -> dict[str, Any]:
    """One run of the library's own shape: its own process group on the worker's cores, against the
    run's broker Redis under a run id of its own, bounded by ``timeout`` (and its stop); its keys deleted."""
    run_id = f"parity-{uuid.uuid4().hex[:10]}"
    log = out / f"script-{shape.library}-{run_id}.log"
    say(f"[{shape.library}] its own shape: {tasks} no-op tasks, concurrency {shape.concurrency}, "
        f"{shape.enqueue} enqueue, timed by {shape.timing}")
    argv = script_argv(shape, tasks, python, redis.broker_url, f"taskbench:{run_id}:", timeout)
    try:
        with Stack({**os.environ, "PYTHONUNBUFFERED": "1"}, name=run_id, stop_timeout=10) as stack:
            proc = stack.start("script", argv, log, cpus=placement.workers)
            stack.wait_ready(lambda: not proc.alive(), timeout=timeout + 120, interval=0.2,
                             what=f"the {shape.library} script to finish (log: {log})")
            code = proc.exit_code()
    finally:
        _delete_keys(redis, run_id, meta)
    lines = log.read_text(errors="replace").strip().splitlines()
    last = next((line for line in reversed(lines) if line.startswith('{"tasks"')), None)
    row: dict[str, Any] = json.loads(last) if last else {}
    if code == SCRIPT_FAILED and row.get("error"):  # the library raised: the run's result, as published
        say(f"[{shape.library}] its own shape failed at {row['stage']}: {row['error']} "
            f"({row['enqueued']} of {tasks} enqueued in {row['enqueue_s']:.1f} s)")
        return {"tasks_per_s": None, "drain_s": None, "enqueue_s": row["enqueue_s"], "executed": 0,
                "worker_cpu_us_per_task": None, "error": row["error"], "stage": row["stage"],
                "enqueued": row["enqueued"], "log": str(log)}
    if code != 0 or not row:
        raise HarnessError(f"the {shape.library} script failed (exit {code}): " + "\n".join(lines[-10:]))
    return {"tasks_per_s": row["tasks_per_s"], "drain_s": row["drain_s"], "enqueue_s": row["enqueue_s"],
            "executed": row["executed"], "worker_cpu_us_per_task": row["worker_cpu_us_per_task"], "log": str(log)}


#: the longest taskbench's round of a parity drain lasts: long enough for every task, as the script's
WHOLE_DRAIN_SECONDS = 600.0


def _drain(shape: Shape, tasks: int, ledger: bool, python: Path, redis: RunRedis, meta: backends.BackendInfo,
           out: Path, placement: Placement, say: Say) -> dict[str, Any]:
    """One ``taskbench drain --workload noop`` round of the same task count and concurrency."""
    # the script drains every task: so does this round (bounded as the drain's timeout was before rounds had one)
    (row,) = _drain_backend(shape.library, meta, python, {}, redis, out, tasks=tasks, seconds=WHOLE_DRAIN_SECONDS,
                            concurrency=shape.concurrency, ledger_modes=[ledger], workload="noop", repeat=1,
                            placement=placement, paired=False, say=say)
    return {"tasks_per_s": row.get("steady_per_s") or row["drain_per_s"], "drain_s": row["drain_s"],
            "whole_drain_per_s": row["drain_per_s"], "enqueue_s": row["enqueue_s"], "executed": row["executed"],
            "worker_cpu_us_per_task": row.get("worker_cpu_us_per_task"), "version": row.get("version")}


def _delete_keys(redis: RunRedis, run_id: str, meta: backends.BackendInfo) -> None:
    import redis as redis_py

    client = redis_py.Redis.from_url(redis.url)
    broker = None if redis.shared else redis_py.Redis.from_url(redis.broker_url)
    try:
        delete_run_keys(client, run_id, meta, broker)
    finally:
        client.close()
        if broker is not None:
            broker.close()
