"""``taskbench drain``: per backend, a worker's drain rate, ledger on and off (one worker at a time, or
both modes at once side by side), and the ledger's ratio."""

from __future__ import annotations

import contextlib
import json
import os
import uuid
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path
from typing import Any

from taskbench import backends, brokers
from taskbench.files import write_atomic
from taskbench.harness import HarnessError, progress
from taskbench.harness.brokers import provide_broker
from taskbench.harness.brokers.redis import RunRedis, provide_redis
from taskbench.harness.case.stop import purge
from taskbench.harness.config import Placement, RunConfig
from taskbench.harness.keys import delete_run_keys
from taskbench.harness.processes.envs import ensure_env, versions
from taskbench.harness.processes.stack import Stack
from taskbench.procgroup import Managed


def run_drain(
    names: list[str], *, tasks: int, concurrency: int, ledger_modes: list[bool], redis_url: str | None,
    output: Path, say: Callable[[str], None] = print, workload: str = "io/simple", repeat: int = 1,
    placement: Placement | None = None, paired: bool = False, seconds: float | None = None,
) -> list[dict[str, Any]]:
    """Per backend, ``repeat`` rounds of a drain per ledger mode, the modes alternating within a round
    (on a shared machine a slow stretch then hits both modes, and ``ledger_ratios`` takes medians).

    ``paired``: each round drains both modes at once instead, two workers side by side on the same
    cores (:func:`taskbench.drain_case.measure_pair`), the mode started first alternating between rounds;
    ``ledger_ratios`` then takes the median of the rounds' ratios.

    ``placement``: the worker on ``workers``' cores, the Redis servers on ``redis``', the process that
    enqueues and watches the drain on ``driver``'s (see :func:`drain_placement`).

    ``seconds``: the longest a round drains (:data:`taskbench.drain_case.ROUND_SECONDS` by default); a round
    ends when every task ran or then, its rate taken over what ran (:mod:`taskbench.drain_case`)."""
    from taskbench.drain_case import ROUND_SECONDS

    seconds = ROUND_SECONDS if seconds is None else seconds

    placement = placement or Placement()
    out = output / f"drain-{uuid.uuid4().hex[:8]}"
    out.mkdir(parents=True, exist_ok=True)
    rows: list[dict[str, Any]] = []
    with provide_redis(redis_url, out, cpus=placement.redis, say=say) as redis:
        for name in names:
            meta = backends.info(name)
            if not meta.has_worker:
                say(f"[{name}] skipped: no worker process, nothing to drain")
                continue
            python = ensure_env(meta.extra)
            with _broker_of(name, meta, out, placement, say) as broker_env:
                rows += _drain_backend(name, meta, python, broker_env, redis, out, tasks=tasks, seconds=seconds,
                                       concurrency=concurrency, ledger_modes=ledger_modes, workload=workload,
                                       repeat=repeat, placement=placement, paired=paired, say=say)
    write_atomic(out / "drain.json", json.dumps(rows, indent=1))
    return rows


@contextlib.contextmanager
def _broker_of(name: str, meta: backends.BackendInfo, out: Path, placement: Placement,
               say: Callable[[str], None]) -> Iterator[dict[str, str]]:
    """The TASKBENCH_* variables of the backend's broker: its default one. Redis: the run's embedded
    broker (set per round); PostgreSQL: a private server for this backend's rounds."""
    broker = meta.brokers[0]
    facts = brokers.info(broker)
    if facts.can_be_ledger:
        yield {}
        return
    if not facts.private_per_case:  # a RabbitMQ/NATS server is the machine's: drain starts none
        raise HarnessError(f"taskbench drain runs {name} on {broker}, which it cannot start")
    with provide_broker(broker, out / f"broker-{name}", cpus=placement.redis,
                        say=lambda text: say(f"[{name}] {text}")) as server:
        yield {"TASKBENCH_BROKER": broker, "TASKBENCH_BROKER_URL": server.url}


def _drain_backend(name: str, meta: backends.BackendInfo, python: Path, broker_env: dict[str, str],
                   redis: RunRedis, out: Path, *, tasks: int, seconds: float, concurrency: int,
                   ledger_modes: list[bool],
                   workload: str, repeat: int, placement: Placement, paired: bool,
                   say: Callable[[str], None]) -> list[dict[str, Any]]:
    """:func:`run_drain`'s rounds of one backend."""
    from taskbench.drain_case import pair_run_ids

    rows: list[dict[str, Any]] = []
    url = redis.url
    cases: list[tuple[int, bool]] = (
        [(r, r % 2 == 0) for r in range(repeat)] if paired  # the mode whose worker starts first
        else [(r, m) for r in range(repeat) for m in (ledger_modes[::-1] if r % 2 else ledger_modes)])
    for round_, ledger in cases:
        run_id = f"drain-{uuid.uuid4().hex[:10]}"
        env = {**os.environ, "TASKBENCH_BACKEND": name, "TASKBENCH_REDIS_URL": url,
               "TASKBENCH_BROKER_URL": redis.broker_url,
               "TASKBENCH_RUN_ID": run_id, "TASKBENCH_LEDGER": str(ledger).lower(),
               "TASKBENCH_CONCURRENCY": str(concurrency), "PYTHONUNBUFFERED": "1", **broker_env}
        mode = "on" if ledger else "off"
        what = f"ledger on and off at once, round {round_ + 1} of {repeat}" if paired else f"ledger {mode}"
        say(f"[{name}] {tasks} {workload} tasks{' a worker' if paired else ''}, {what}")
        label = f"paired-{round_}" if paired else f"{'ledger' if ledger else 'noledger'}-{round_}"
        log = out / f"drain-case-{name}-{label}.log"
        argv = [str(python), "-m", "taskbench", "drain-case", "--tasks", str(tasks), "--seconds", str(seconds),
                "--log-dir", str(out), "--workload", workload,
                "--worker-cpus", ",".join(map(str, placement.workers or []))]
        if paired:
            argv += ["--paired", mode]
        used = list(pair_run_ids(run_id).values()) if paired else [run_id]
        try:
            with progress.phase(f"[{name}] enqueue and drain, {what}"), \
                    Stack(env, name=run_id, stop_timeout=30) as stack:
                case = stack.start("drain-case", argv, log, cpus=placement.driver)
                # the enqueue, the workers' start and stop, and the round's own seconds
                stack.wait_ready(partial(_exited, case), timeout=600 + seconds, interval=0.2,
                                 what=f"the drain of {name} to finish (log: {log})")
                code = case.exit_code()
        except BaseException:
            with contextlib.suppress(Exception):  # the keys go; the reason it stopped is what is reported
                _cleanup(redis, used, meta, python, env, out)
            raise
        _cleanup(redis, used, meta, python, env, out)
        rows += _rows(log, name, code, python, round_)
    return rows


def _rows(log: Path, name: str, code: int | None, python: Path, round_: int) -> list[dict[str, Any]]:
    """The row (one worker) or rows (a paired drain) a drain-case printed last, with the library's version."""
    lines = log.read_text(errors="replace").strip().splitlines()
    if code != 0 or not lines or not lines[-1].startswith(("{", "[")):
        raise HarnessError(f"drain of {name} failed (exit {code}): " + "\n".join(lines[-10:]))
    printed = json.loads(lines[-1])
    packages: Any = versions(str(python)).get("packages", {})
    rows: list[dict[str, Any]] = printed if isinstance(printed, list) else [printed]
    for row in rows:
        row["version"] = packages.get(name) or packages.get(backends.info(name).extra)  # saq-postgres: saq's
        row["round"] = round_
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
    the rate.

    ``ledger_us_per_task`` is the ledger's own cost, the worker CPU µs a task with it on minus with it off
    (what a user subtracts from a figure measured with the ledger on, as every ``run`` is).

    Paired rounds (both modes at once, ``method`` "paired") give a ratio each, over the same seconds:
    ``ratio``, ``cpu_ratio`` and ``ledger_us_per_task`` are then the medians of the rounds' figures
    (``ratio_rounds``, ``cpu_ratio_rounds``, ``ledger_us_rounds``), which a machine whose speed changes
    between rounds moves far less than a ratio of medians."""
    import statistics

    def median(values: list[float]) -> float | None:
        return statistics.median(values) if values else None

    out: dict[str, dict[str, Any]] = {}
    pairs: dict[str, dict[int, dict[bool, dict[str, Any]]]] = {}
    for row in rows:
        entry = out.setdefault(row["backend"], {"version": row.get("version"), "workload": row.get("workload"),
                                                "method": "paired" if row.get("paired") else "alternating",
                                                "rounds_on": [], "rounds_off": [], "cpu_rounds_on": [],
                                                "cpu_rounds_off": []})
        mode = "on" if row["ledger"] else "off"
        rate = row.get("steady_per_s") if row.get("paired") else _rate(row)
        if rate is not None:  # a paired worker's whole drain ends alone: only the shared window counts
            entry[f"rounds_{mode}"].append(rate)
        if row.get("worker_cpu_us_per_task"):
            entry[f"cpu_rounds_{mode}"].append(row["worker_cpu_us_per_task"])
        if row.get("paired"):
            pairs.setdefault(row["backend"], {}).setdefault(row["round"], {})[row["ledger"]] = row
    for backend, entry in out.items():
        on = entry["on"] = median(entry["rounds_on"])
        off = entry["off"] = median(entry["rounds_off"])
        cpu_on = entry["cpu_on_us_per_task"] = median(entry["cpu_rounds_on"])
        cpu_off = entry["cpu_off_us_per_task"] = median(entry["cpu_rounds_off"])
        if entry["method"] == "paired":
            both = [p for _, p in sorted(pairs[backend].items()) if len(p) == 2]
            entry["ratio_rounds"] = [_ratio(p[True].get("steady_per_s"), p[False].get("steady_per_s"))
                                     for p in both]
            entry["cpu_ratio_rounds"] = [_ratio(p[False].get("worker_cpu_us_per_task"),
                                                p[True].get("worker_cpu_us_per_task")) for p in both]
            entry["ledger_us_rounds"] = [_difference(p[True].get("worker_cpu_us_per_task"),
                                                     p[False].get("worker_cpu_us_per_task")) for p in both]
            entry["ratio"] = median([r for r in entry["ratio_rounds"] if r is not None])
            entry["cpu_ratio"] = median([r for r in entry["cpu_ratio_rounds"] if r is not None])
            entry["ledger_us_per_task"] = median([r for r in entry["ledger_us_rounds"] if r is not None])
        else:
            entry["ratio"] = _ratio(on, off)
            entry["cpu_ratio"] = _ratio(cpu_off, cpu_on)
            entry["ledger_us_per_task"] = _difference(cpu_on, cpu_off)
    return out


def _rate(row: dict[str, Any]) -> float:
    return float(row.get("steady_per_s") or row["drain_per_s"])


def _ratio(top: float | None, bottom: float | None) -> float | None:
    return top / bottom if top is not None and bottom else None


def _difference(on: float | None, off: float | None) -> float | None:
    return on - off if on is not None and off is not None else None


def _exited(proc: Managed) -> bool:
    return not proc.alive()


def _cleanup(servers: RunRedis, run_ids: list[str], meta: backends.BackendInfo, python: Path,
             env: dict[str, str], out: Path) -> None:
    """The rounds' keys, and on a broker other than Redis what the rounds made there (``taskbench purge``)."""
    import redis

    if brokers.info(env.get("TASKBENCH_BROKER", brokers.DEFAULT)).purge_on_cleanup:
        for run_id in run_ids:
            purge(python, {**env, "TASKBENCH_RUN_ID": run_id}, out / f"purge-{run_id}")

    client = redis.Redis.from_url(servers.url)
    broker = None if servers.shared else redis.Redis.from_url(servers.broker_url)
    try:
        for run_id in run_ids:
            delete_run_keys(client, run_id, meta, broker)
    finally:
        client.close()
        if broker is not None:
            broker.close()


@contextlib.contextmanager
def case_broker(cfg: RunConfig, name: str, redis: RunRedis, out: Path,
                say: Callable[[str], None]) -> Iterator[tuple[dict[str, str], tuple[int, ...]]]:
    """``name``'s broker for a drain of ``cfg`` (``--broker``, else the backend's default): its
    TASKBENCH_* variables and the pids of its processes when the harness started it (else none).
    Redis: the run's embedded broker; PostgreSQL: a private server; RabbitMQ/NATS: the one named or the
    machine's, checked first (its name and port in the error)."""
    from taskbench.harness.brokers import check_broker, needs_private_broker
    from taskbench.settings import Settings

    broker = cfg.broker_for(name)
    if brokers.info(broker).can_be_ledger:
        pids = tuple(redis.broker.members()) if redis.broker is not None else ()
        yield {"TASKBENCH_BROKER": broker, "TASKBENCH_BROKER_URL": redis.broker_url}, pids
        return
    if needs_private_broker(broker, cfg.broker_url, None):
        with provide_broker(broker, out / f"broker-{name}", say=lambda text: say(f"[{name}] {text}")) as server:
            yield {"TASKBENCH_BROKER": broker, "TASKBENCH_BROKER_URL": server.url}, tuple(server.members())
        return
    url = Settings(broker=broker, broker_url=cfg.broker_url).broker_address
    check_broker(broker, url)
    yield {"TASKBENCH_BROKER": broker, "TASKBENCH_BROKER_URL": url}, ()


def drain_of(cfg: RunConfig, name: str, python: Path, redis: RunRedis, out: Path, *, workers: int, tasks: int,
             seconds: float, say: Callable[[str], None] = print) -> dict[str, Any]:
    """``workers`` workers of ``name`` drain ``tasks`` of ``cfg``'s workload (the user's task with its
    payload too) enqueued beforehand, no HTTP, for at most ``seconds``: the row of
    :func:`taskbench.drain_case.measure` (rates, CPU per task of the workers and of the broker, memory).
    The ledger is on: every task's run is counted as in ``run``."""
    from taskbench.params import settings_env

    run_id = f"drain-{uuid.uuid4().hex[:10]}"
    log = out / f"drain-{name}-{workers}w-{run_id}.log"
    out.mkdir(parents=True, exist_ok=True)
    argv = [str(python), "-m", "taskbench", "drain-case", "--tasks", str(tasks), "--seconds", str(seconds),
            "--log-dir", str(out), "--workload", cfg.route_workload, "--workers", str(workers)]
    if cfg.user_task:
        template = out / f"payload-{run_id}.json"
        write_atomic(template, json.dumps(cfg.payload_template()))
        argv += ["--payload", str(template)]
    meta = backends.info(name)
    with case_broker(cfg, name, redis, out, say) as (broker_env, pids):
        env = {**os.environ, **settings_env(cfg, backend=name, run_id=run_id, redis_url=redis.url),
               **broker_env, "TASKBENCH_LEDGER": "true"}
        if pids:
            argv += ["--broker-pids", ",".join(map(str, pids))]
        try:
            with progress.phase(f"[{name}] {workers} worker(s) drain {tasks} tasks"), \
                    Stack(env, name=run_id, stop_timeout=30) as stack:
                case = stack.start("drain-case", argv, log)
                stack.wait_ready(partial(_exited, case), timeout=600 + seconds, interval=0.2,
                                 what=f"the drain of {name} to finish (log: {log})")
                code = case.exit_code()
        finally:
            with contextlib.suppress(Exception):  # the keys go; a failure of the drain is what is reported
                _cleanup(redis, [run_id], meta, python, env, out)
    (row,) = _rows(log, name, code, python, 0)
    row["log"] = str(log)
    kept = log.with_suffix(".json")  # the figures, on their own, beside the log they were printed to
    write_atomic(kept, json.dumps(row, indent=1))
    row["file"] = str(kept)
    return row
