"""Runs the cases of a benchmark: start, wait ready, warm up, load, drain, audit, stop, clean."""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import os
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from taskbench import backends
from taskbench.driver import LoadSpec, RequestTemplate, run_load
from taskbench.harness import HarnessError
from taskbench.harness.cgroups import Cgroups, tree_cpu
from taskbench.harness.config import RunConfig
from taskbench.harness.envs import ensure_env, project_root, versions
from taskbench.harness.faults import Injector, summarize
from taskbench.harness.machine import result_header
from taskbench.harness.processes import Managed, ProcessSet
from taskbench.harness.redis_server import check_broker, check_port_free, free_port, provide_redis
from taskbench.harness.scrape import cross_check
from taskbench.ledger import Ledger, audit
from taskbench.settings import Settings

Say = Callable[[str], None]
WARMUP_PREFIX = "w"
SCHEMA = 1


def _stamp() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%S")


class Runner:
    def __init__(self, config: RunConfig, say: Say = print, run_id: str | None = None) -> None:
        self.config = config
        self.say = say
        self.run_id = run_id or f"{_stamp()}-{os.getpid()}"
        self.out_dir = config.output / self.run_id
        self.root = project_root()

    # -- public ---------------------------------------------------------------------------

    def run(self) -> dict[str, Any]:
        cfg = self.config
        self.out_dir.mkdir(parents=True, exist_ok=True)
        result = result_header(self.run_id, self.root, SCHEMA, config=cfg.to_dict())
        result.update(environments={}, cases=[])
        pythons = {name: self.environment(name) for name in cfg.backends}
        result["environments"] = {n: versions(str(p)) for n, p in pythons.items()}
        with provide_redis(cfg.redis_url, self.out_dir, cpus=cfg.placement.redis,
                           say=self.say) as (redis_url, redis_info):
            result["redis"] = redis_info
            if cfg.broker != "redis":
                broker_url = Settings(broker=cfg.broker, broker_url=cfg.broker_url).broker_address
                check_broker(cfg.broker, broker_url)
            for index, name in enumerate(cfg.backends):
                case = self.run_case(index, name, pythons[name], redis_url)
                result["cases"].append(case)
                self._write(result)
        return result

    def result_path(self) -> Path:
        return self.out_dir / "result.json"

    # -- pieces ---------------------------------------------------------------------------

    def environment(self, name: str) -> Path:
        meta = backends.info(name)
        return ensure_env(meta.extra)

    def _settings_env(self, name: str, run_id: str, redis_url: str) -> dict[str, str]:
        from taskbench.params import settings_env

        return settings_env(self.config, backend=name, run_id=run_id, redis_url=redis_url)

    def run_case(self, index: int, name: str, python: Path, redis_url: str) -> dict[str, Any]:
        """One backend under ``self.config``, in a fresh set of processes (a scenario swaps the config)."""
        import redis

        cfg = self.config
        backend = backends.info(name)
        run_id = f"{self.run_id}-{index}-{name}"
        logs = self.out_dir / "logs" / f"{index}-{name}"
        env_vars = self._settings_env(name, run_id, redis_url)
        env_vars["TASKBENCH_METRICS_DIR"] = str(logs / "metrics")
        settings = Settings(backend=name, redis_url=redis_url, run_id=run_id)
        ledger = Ledger(settings.prefix)
        client = redis.Redis.from_url(redis_url)
        port = cfg.api_port or free_port()
        check_port_free("127.0.0.1", port)
        case: dict[str, Any] = {
            "backend": name,
            "broker": cfg.broker,
            "workload": cfg.workload,
            "enqueue_mode": cfg.enqueue_mode,
            "durable": backend.durable and cfg.enqueue_mode == "awaited",
            "has_worker": backend.has_worker,
            "workers": cfg.workers if backend.has_worker else 0,
            "concurrency": cfg.concurrency,
            "run_id": run_id,
            "placement": cfg.placement.to_dict(),
            "failures": [],
        }
        self.say(f"[{name}] starting API on 127.0.0.1:{port}"
                 + (f" and {cfg.workers} worker(s)" if backend.has_worker else ""))
        procs = ProcessSet({**os.environ, **env_vars}, stop_timeout=cfg.stop_timeout)
        cgroups = Cgroups(run_id)
        try:
            with procs:
                if backend.has_worker:
                    for i in range(cfg.workers):
                        procs.start(f"worker-{i}", [str(python), "-m", "taskbench", "worker"],
                                    logs / f"worker-{i}.log", cpus=cfg.placement.workers)
                procs.start("api", [str(python), "-m", "taskbench", "serve", "--host", "127.0.0.1",
                                    "--port", str(port)], logs / "api.log", cpus=cfg.placement.api)
                self._wait_ready(procs, client, settings, port,
                                 cfg.workers if backend.has_worker else 0)
                if cfg.limits:
                    case["limits"] = self._apply_limits(procs, cgroups, name)
                template = RequestTemplate(
                    host="127.0.0.1", port=port,
                    path=f"/api/v1/incr/{cfg.workload}/{name}",
                    body='{{"value":1,"task_id":"{task_id}","enqueued_at":{enqueued_at}}}',
                )
                warm_accepted = self._warm_up(template, procs, client, ledger)
                self.say(f"[{name}] load: {_describe_load(cfg.load)}")
                limited = case.get("limits", {})
                for record in limited.values():
                    record["cpu_at_load_start"] = tree_cpu(record["pids"][0]) if record["pids"] else None
                injector = self._injector(procs, cgroups, client, settings, port, case)
                load_start = time.time()
                with pinned(cfg.placement.driver), injector.armed(load_start) if injector \
                        else contextlib.nullcontext():
                    load = run_load(template, cfg.load)
                load_end = time.time()
                if injector is not None:
                    case["fault"] = injector.record
                    if "error" in injector.record:
                        case["failures"].append(f"fault {cfg.fault.describe() if cfg.fault else ''}: "
                                                f"{injector.record['error']}")
                for record in limited.values():
                    # the share of a CPU each limited component used while the load ran: at the
                    # limit, that component was the bottleneck
                    used = tree_cpu(record["pids"][0]) if record["pids"] else None
                    start_cpu = record.pop("cpu_at_load_start")
                    if used is not None and start_cpu is not None and load_end > load_start:
                        record["load_cpu"] = (used - start_cpu) / (load_end - load_start)
                self.say(f"[{name}] {load.ok} accepted at {load.rps:.0f} req/s; draining")
                target = warm_accepted + len(load.accepted_ids)
                drained, drain_deadline = self._drain(procs, client, ledger, target, load_end, case,
                                                      load.accepted_ids)
                if not drained:
                    time.sleep(cfg.late_grace)
                counts, times = ledger.read(client)
                report = audit(load.accepted_ids, counts, times, deadline=drain_deadline,
                               ignore_prefix=WARMUP_PREFIX)
                if "fault" in case:
                    summarize(case["fault"], times)
                case["metrics"] = self._cross_check(client, settings, port, sum(counts.values()), case)
                for component, record in case.get("limits", {}).items():
                    record["stats"] = cgroups.stats(component)
                    used = tree_cpu(record["pids"][0]) if record["pids"] else None
                    if used is not None and record.get("cpu_at_start") is not None:
                        # CPU seconds over the warm-up, load and drain: the limit's effect, measured
                        record["stats"]["cpu_s"] = used - record["cpu_at_start"]
                        record["stats"]["wall_s"] = time.monotonic() - record["applied_at"]
        finally:
            cgroups.release()
            case["exit_codes"] = procs.exit_codes
            client_cleanup = self._cleanup(client, settings, backend)
            client.close()
            if cfg.broker != "redis" and not cfg.keep:
                client_cleanup["purge"] = _purge(python, env_vars, logs)
        for proc_name, code in case["exit_codes"].items():
            if code not in (0, -15):
                case["failures"].append(f"{proc_name} exited with code {code} at stop")
        load_dict = load.to_dict()
        load_dict.pop("accepted_ids", None)
        failed = load_dict.pop("failed_ids", {})
        load_dict["failed_ids_sample"] = dict(list(failed.items())[:20])
        case["load"] = load_dict
        case["audit"] = report.to_dict()
        case["cleanup"] = client_cleanup
        case["summary"] = _summary(load_dict, report.to_dict(), load_start, drained)
        if case.get("fault", {}).get("injected"):
            fault = case["fault"]
            case["summary"].update(fault=fault["fault"], restart_ready_s=fault.get("ready_after_s"),
                                   accepting_again_s=fault.get("accepting_again_s"),
                                   executing_again_s=fault.get("executing_again_s"))
        case["status"] = _status(case, report.ok, drained)
        case["logs"] = str(logs)
        return case

    def _injector(self, procs: ProcessSet, cgroups: Cgroups, client: Any, settings: Settings,
                  port: int, case: dict[str, Any]) -> Injector | None:
        fault = self.config.fault
        if fault is None:
            return None
        if fault.target.startswith("worker") and not case["has_worker"]:
            case["fault"] = {"fault": fault.describe(), "injected": False,
                             "note": f"{case['backend']} has no worker process to kill"}
            return None

        def ready(proc: Managed) -> bool:
            if proc.name == "api":
                return healthy(port)
            return bool(client.hexists(f"{settings.prefix}ready", f"worker:{proc.pid}"))

        def restarted(proc: Managed) -> None:
            # the new process gets the limits the killed one had, as a restarted container would
            limit = self.config.limits.get("api" if proc.name == "api" else "workers")
            if limit is not None:
                applied = cgroups.apply(proc.name, [proc.pid], limit)
                case.setdefault("fault_limits", {})[proc.name] = applied

        return Injector(fault, procs, ready=ready, restarted=restarted,
                        ready_timeout=self.config.startup_timeout)

    def _apply_limits(self, procs: ProcessSet, cgroups: Cgroups, name: str) -> dict[str, Any]:
        """Each process (and its children) in a group of its own, as docker limits each container.

        Applied once the stack is ready: start-up (imports) runs unlimited, the load does not.
        """
        records: dict[str, Any] = {}
        for proc in procs.procs:
            limit = self.config.limits.get("api" if proc.name == "api" else "workers")
            if limit is not None:
                records[proc.name] = cgroups.apply(proc.name, [proc.pid], limit)
                records[proc.name]["cpu_at_start"] = tree_cpu(proc.pid)
                records[proc.name]["applied_at"] = time.monotonic()
                if not records[proc.name]["applied"]:
                    self.say(f"[{name}] {proc.name}: limits {limit.describe()} not applied: "
                             + "; ".join(records[proc.name]["notes"]))
        return records

    def _wait_ready(self, procs: ProcessSet, client: Any, settings: Settings, port: int,
                    workers: int) -> None:
        deadline = time.monotonic() + self.config.startup_timeout
        ready_key = f"{settings.prefix}ready"
        while time.monotonic() < deadline:
            for proc in procs.dead():
                raise HarnessError(f"{proc.name} exited with code {proc.exit_code()} during "
                                   f"start-up; its log ({proc.log_path}) ends:\n{proc.tail()}")
            if healthy(port) and int(client.hlen(ready_key)) >= workers:
                return
            time.sleep(0.1)
        raise HarnessError(f"the stack was not ready within {self.config.startup_timeout:.0f} s "
                           f"(logs in {self.out_dir / 'logs'})")

    def _warm_up(self, template: RequestTemplate, procs: ProcessSet, client: Any,
                 ledger: Ledger) -> int:
        cfg = self.config
        if not cfg.warmup:
            return 0
        spec = LoadSpec(users=min(cfg.load.users, 10), requests=cfg.warmup, id_prefix=WARMUP_PREFIX,
                        timeout=cfg.load.timeout)
        warm = run_load(template, spec)
        if not warm.ok:
            raise HarnessError(f"warm-up: none of {warm.requests} requests was accepted "
                               f"(errors: {warm.errors}); see the logs in {self.out_dir / 'logs'}")
        deadline = time.monotonic() + cfg.drain_timeout
        while ledger.executed_count(client) < warm.ok and time.monotonic() < deadline:
            if procs.dead():
                break
            time.sleep(0.05)
        return warm.ok

    def _drain(self, procs: ProcessSet, client: Any, ledger: Ledger, target: int,
               load_end: float, case: dict[str, Any], accepted: list[str]) -> tuple[bool, float]:
        deadline = load_end + self.config.drain_timeout
        reported: set[str] = set()
        waiting = accepted
        while True:
            # the count is cheap; it can reach the target early when tasks whose 2xx never reached
            # the driver ran (an API killed between enqueue and answer), so the ids decide
            if ledger.executed_count(client) >= target:
                waiting = ledger.unseen(client, waiting)
                if not waiting:
                    return True, deadline
            for proc in procs.dead():
                if proc.name not in reported:
                    reported.add(proc.name)
                    msg = f"{proc.name} died during the run (exit code {proc.exit_code()})"
                    case["failures"].append(msg)
                    self.say(f"[{case['backend']}] {msg}")
            workers = [p for p in procs.procs if p.name.startswith("worker")]
            api_dead = any(p.name == "api" for p in procs.dead())
            if (workers and all(not p.alive() for p in workers)) or (api_dead and not workers):
                return False, deadline  # nothing left that could run the remaining tasks
            if time.time() > deadline:
                case["failures"].append(
                    f"drain timeout: {self.config.drain_timeout:.0f} s after the load ended, "
                    f"{len(ledger.unseen(client, waiting))} accepted tasks had not run")
                return False, deadline
            time.sleep(0.05)

    def _cross_check(self, client: Any, settings: Settings, port: int, executions: int,
                     case: dict[str, Any]) -> dict[str, Any]:
        """The processes' own counters must agree with the ledger: succeeded == executions."""
        urls = {"api": f"http://127.0.0.1:{port}/metrics"}
        urls.update({_text(k): _text(v) for k, v in client.hgetall(settings.metrics_key).items()})
        fault = case.get("fault", {})
        checked = cross_check(urls, executions, settle=0.5 if fault.get("injected") else 3.0)
        if not checked["match"] and fault.get("injected"):
            # a SIGKILLed process takes its /metrics with it: its counts cannot be scraped
            checked["note"] = (f"{fault['target']} was killed mid-run, so its counters are gone; "
                               "the ledger's audit is the account of this run")
        elif not checked["match"]:
            succeeded = checked["totals"].get("taskbench_tasks_succeeded_total", 0)
            case["failures"].append(
                f"metrics disagree with the ledger: {succeeded:.0f} tasks succeeded by the workers' "
                f"counters, {executions} executions in the ledger"
                + (f" ({'; '.join(checked['errors'])})" if checked["errors"] else ""))
        return checked

    def _cleanup(self, client: Any, settings: Settings, backend: Any) -> dict[str, Any]:
        if self.config.keep:
            return {"kept": True, "prefix": settings.prefix}
        patterns, deleted = delete_run_keys(client, settings.run_id, backend)
        return {"kept": False, "patterns": patterns, "deleted_keys": deleted}

    def _write(self, result: dict[str, Any]) -> None:
        path = self.result_path()
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(result, indent=1))
        tmp.replace(path)


def delete_run_keys(client: Any, run_id: str, backend: backends.BackendInfo) -> tuple[list[str], int]:
    """Delete the run's keys (its prefix and the library's own key patterns); never anything else."""
    deleted = 0
    patterns = [f"taskbench:{run_id}:*", *backend.owned_key_patterns(run_id)]
    for pattern in patterns:
        batch: list[bytes] = []
        for key in client.scan_iter(match=pattern, count=1000):
            batch.append(key)
            if len(batch) >= 1000:
                deleted += int(client.unlink(*batch))
                batch.clear()
        if batch:
            deleted += int(client.unlink(*batch))
    return patterns, deleted


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


def _purge(python: Path, env_vars: dict[str, str], logs: Path) -> str:
    """Delete the run's queues or streams on a RabbitMQ/NATS broker, from the backend's environment."""
    import subprocess

    out = subprocess.run([str(python), "-m", "taskbench", "purge"], env={**os.environ, **env_vars},
                         capture_output=True, text=True, timeout=60, check=False)
    (logs / "purge.log").write_text(out.stdout + out.stderr)
    return "ok" if out.returncode == 0 else f"failed (exit {out.returncode}, see purge.log)"


def _status(case: dict[str, Any], audit_ok: bool, drained: bool) -> str:
    """ok: clean; errors: some requests failed but every accepted task ran once; failed: otherwise."""
    summary = case["summary"]
    if not audit_ok or not drained or case["failures"] or not summary["accepted"]:
        return "failed"
    return "errors" if summary["errors_pct"] else "ok"


def healthy(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=1) as resp:
            return bool(resp.status == 200)
    except (urllib.error.URLError, OSError):
        return False


@contextlib.contextmanager
def pinned(cpus: list[int] | None) -> Iterator[None]:
    """Pin this process (and so the driver processes it spawns) for the load phase."""
    if not cpus:
        yield
        return
    before = os.sched_getaffinity(0)
    os.sched_setaffinity(0, cpus)
    try:
        yield
    finally:
        os.sched_setaffinity(0, before)


def _describe_load(spec: LoadSpec) -> str:
    bounds = []
    if spec.requests:
        bounds.append(f"{spec.requests} requests")
    if spec.duration:
        bounds.append(f"{spec.duration:g} s")
    rate = f" at {spec.rate:g}/s" if spec.model == "open" else ""
    return f"{spec.model} model, {spec.users} users{rate}, {' or '.join(bounds)}"


def _summary(load: dict[str, Any], report: dict[str, Any], load_start: float,
             drained: bool) -> dict[str, Any]:
    lat = load.get("latency_ms", {})
    requests = max(1, int(load["requests"]))
    errors = requests - int(load["ok"])
    last = report["last_finish"]
    return {
        "requests": load["requests"],
        "rps": load["rps"],
        "p50_ms": lat.get("p50"),
        "p95_ms": lat.get("p95"),
        "p99_ms": lat.get("p99"),
        "errors_pct": 100.0 * errors / requests,
        "time_to_run_all_s": (last - load_start) if (last and drained) else None,
        "accepted": report["accepted"],
        "executed": report["executed"],
        "lost": report["lost"],
        "duplicated": report["duplicated"],
        "late": report["late"],
        "e2e_p95_ms": report["end_to_end_ms"].get("p95"),
        "driver_cpu_pct": 100.0 * float(load["max_utilization"]),
        "driver_saturated": bool(load["saturated"]),
    }
