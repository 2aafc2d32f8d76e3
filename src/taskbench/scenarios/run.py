"""Run a scenario: every case in fresh processes, one result JSON, one table with the article beside ours."""

from __future__ import annotations

import datetime as dt
import json
import os
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

from taskbench.harness.config import Placement
from taskbench.scenarios.spec import Case, Scenario

Say = Callable[[str], None]
SCHEMA = 1


def _stamp() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%S")


class ScenarioRunner:
    def __init__(self, scenario: Scenario, *, output: Path, redis_url: str | None = None,
                 cases: list[int] | None = None, say: Say = print) -> None:
        self.scenario = scenario
        self.output = output
        self.redis_url = redis_url
        self.say = say
        self.run_id = f"{scenario.name}-{_stamp()}-{os.getpid()}"
        self.out_dir = output / self.run_id
        selected = scenario.cases if cases is None else [c for c in scenario.cases if c.index in cases]
        if not selected:
            raise ValueError(f"no case selected; the scenario has cases 0..{len(scenario.cases) - 1}")
        self.cases = selected

    def result_path(self) -> Path:
        return self.out_dir / "result.json"

    def run(self) -> dict[str, Any]:
        from taskbench.harness.envs import project_root
        from taskbench.harness.machine import result_header

        self.out_dir.mkdir(parents=True, exist_ok=True)
        result = result_header(self.run_id, project_root(), SCHEMA, scenario=self.scenario.to_dict())
        result["cases"] = []
        runner = {"queue": self._queue, "http": self._http, "celery": self._celery}[self.scenario.kind]
        runner(result)
        result["finished"] = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
        self._write(result)
        return result

    # -- kinds -----------------------------------------------------------------------------

    def _queue(self, result: dict[str, Any]) -> None:
        from taskbench.harness.envs import versions
        from taskbench.harness.redis_server import provide_redis
        from taskbench.harness.runner import Runner

        configs = [(case, queue_config(case, self.output, self.redis_url)) for case in self.cases]
        runner = Runner(configs[0][1], say=self.say, run_id=self.run_id)
        pythons = {c.params["backend"]: runner.environment(c.params["backend"]) for c, _ in configs}
        result["environments"] = {n: versions(str(p)) for n, p in pythons.items()}
        placement = configs[0][1].placement
        with provide_redis(self.redis_url, self.out_dir, cpus=placement.redis, say=self.say) as (url, info):
            result["redis"] = info
            for case, config in configs:
                self.say(f"case {case.index}: {case.label}")
                runner.config = config
                data = self._repeat(case, partial(runner.run_case, case.index, case.params["backend"],
                                                  pythons[case.params["backend"]], url))
                result["cases"].append(self._finish(case, data))
                self._write(result)

    def _http(self, result: dict[str, Any]) -> None:
        from taskbench.harness.envs import ensure_env, versions
        from taskbench.scenarios import http

        python = ensure_env("servers")
        result["environments"] = {"servers": versions(str(python))}
        placement = Placement.parse("auto")
        for case in self.cases:
            self.say(f"case {case.index}: {case.label}")
            data = self._repeat(case, partial(http.run_case, case, python, self.out_dir, placement, self.say))
            result["cases"].append(self._finish(case, data))
            self._write(result)

    def _celery(self, result: dict[str, Any]) -> None:
        from taskbench.harness.envs import ensure_env, versions
        from taskbench.harness.redis_server import provide_redis
        from taskbench.scenarios import celery_pools

        python = ensure_env("celery")
        result["environments"] = {"celery": versions(str(python))}
        with provide_redis(self.redis_url, self.out_dir, say=self.say) as (url, info):
            result["redis"] = info
            for case in self.cases:
                self.say(f"case {case.index}: {case.label}")
                data = self._repeat(case, partial(celery_pools.run_case, case, python, url, self.out_dir,
                                                  self.run_id, self.say))
                result["cases"].append(self._finish(case, data))
                self._write(result)

    # -- bookkeeping -----------------------------------------------------------------------

    def _repeat(self, case: Case, run_once: Callable[[], dict[str, Any]]) -> dict[str, Any]:
        runs = []
        total = int(case.params.get("repeat", 1))
        for nth in range(total):
            if total > 1:
                self.say(f" run {nth + 1} of {total}")
            runs.append(run_once())
        return combine_runs(runs, RANKED_BY[self.scenario.kind][0])

    @staticmethod
    def _finish(case: Case, data: dict[str, Any]) -> dict[str, Any]:
        data["index"] = case.index
        data.setdefault("label", case.label)
        data["params"] = case.params
        data["limits_asked"] = {k: {"cpu": v.cpu, "memory_mb": v.memory_mb} for k, v in case.limits.items()}
        data["article"] = case.article
        return data

    def _write(self, result: dict[str, Any]) -> None:
        path = self.result_path()
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(result, indent=1, default=str))
        tmp.replace(path)


# the figure a repeated case is ranked by (its median run is the row), and its name in a header
RANKED_BY = {"queue": ("rps", "RPS"), "http": ("rps", "RPS"), "celery": ("tasks_per_s", "tasks/s")}


def combine_runs(runs: list[dict[str, Any]], key: str) -> dict[str, Any]:
    """Several runs of one case as one row: the run with the median ``key``, the spread, every run.

    Correctness is not averaged away: lost and duplicated tasks add up over the runs, and a run
    that failed makes the case fail.
    """
    if len(runs) == 1:
        return runs[0]
    ordered = sorted(runs, key=lambda r: float(r.get("summary", {}).get(key) or 0.0))
    chosen = dict(ordered[len(ordered) // 2])
    summary = dict(chosen.get("summary", {}))
    values = [r.get("summary", {}).get(key) for r in runs]
    numbers = [float(v) for v in values if v is not None]
    summary["runs"] = len(runs)
    if numbers:
        summary[f"{key}_min"], summary[f"{key}_max"] = min(numbers), max(numbers)
    for count in ("lost", "duplicated"):
        if any(count in r.get("summary", {}) for r in runs):
            summary[count] = sum(int(r.get("summary", {}).get(count) or 0) for r in runs)
    chosen["summary"] = summary
    statuses = [r.get("status", "failed") for r in runs]
    chosen["status"] = next((s for s in statuses if s == "failed"), None) \
        or next((s for s in statuses if s != "ok"), "ok")
    chosen["failures"] = [f for r in runs for f in r.get("failures", [])]
    chosen["repeats"] = [{"summary": r.get("summary"), "status": r.get("status")} for r in runs]
    return chosen


def queue_config(case: Case, output: Path, redis_url: str | None) -> Any:
    """The RunConfig of a queue case: its parameters over the schema's defaults."""
    from taskbench import params
    from taskbench.harness.config import RunConfig, load_spec
    from taskbench.harness.faults import Fault

    p = {**params.defaults("queue"), **case.params}
    return RunConfig(
        backends=(p["backend"],), workload=p["workload"], load=load_spec(p), workers=p["workers"],
        concurrency=p["concurrency"], enqueue_mode=p["enqueue_mode"], io_delay=p["io_delay"],
        cpu_iterations=p["cpu_iterations"], redis_url=redis_url, broker=p["broker"], output=output,
        warmup=p["warmup"], drain_timeout=p["drain_timeout"], placement=Placement.parse("auto"),
        limits=case.limits, task_timeout=p["task_timeout"], fault=Fault.parse(p["fault"]) if p["fault"] else None,
    )


def limits_summary(case: dict[str, Any]) -> str:
    """How the limits were applied, for the table: 'cgroup-v1', 'pinning', '–'."""
    records = case.get("limits") or {}
    if not records:
        return "–"
    methods = "/".join(sorted({str(r.get("method")) for r in records.values()}))
    used = []
    for name, record in records.items():
        stats = record.get("stats") or {}
        if record.get("load_cpu") is not None:
            used.append(f"{name} {record['load_cpu']:.2f}")
        elif stats.get("cpu_s") is not None and stats.get("wall_s"):
            used.append(f"{name} {stats['cpu_s'] / stats['wall_s']:.2f}")
    label = "CPU used under load" if any(r.get("load_cpu") is not None for r in records.values()) \
        else "CPU used"
    return methods + (f"; {label}: {', '.join(used)}" if used else "")
