"""Run a scenario: every case in fresh processes, one result JSON, one table with the article beside ours."""

from __future__ import annotations

import datetime as dt
import os
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

from taskbench.harness import progress
from taskbench.harness.config import Placement
from taskbench.results import (
    RANKED_BY,
    CeleryCase,
    HttpCase,
    LimitAsked,
    QueueCase,
    RepeatRun,
    Result,
    ScenarioInfo,
    Spread,
)
from taskbench.scenarios.parse import Case, Scenario

Say = Callable[[str], None]
CaseT = TypeVar("CaseT", QueueCase, HttpCase, CeleryCase)


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

    def run(self) -> Result:
        from taskbench.harness import progress
        from taskbench.harness.machine import result_header
        from taskbench.harness.processes.envs import project_root
        from taskbench.harness.processes.runs import registered

        self.out_dir.mkdir(parents=True, exist_ok=True)
        info = ScenarioInfo.model_validate(self.scenario.to_dict())
        result = Result(kind="scenario", scenario=info, **result_header(self.run_id, project_root()))
        runner = {"queue": self._queue, "http": self._http, "celery": self._celery}[self.scenario.kind]
        with registered(self.output, self.say):  # names a concurrent run, stops a dead one's leftovers
            try:
                runner(result)
            except KeyboardInterrupt as exc:  # what was measured until then, marked interrupted
                result.interrupted = f"interrupted during {progress.phase_of(exc) or 'the start'}"
                result.finished = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
                self._write(result)
                raise
        result.finished = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
        self._write(result)
        return result

    # -- kinds -----------------------------------------------------------------------------

    def _queue(self, result: Result) -> None:
        from taskbench.harness.brokers.redis import provide_redis
        from taskbench.harness.commands.run import Runner
        from taskbench.harness.load.files import check_open_files
        from taskbench.harness.processes.envs import environment_key, versions

        configs = [(case, queue_config(case, self.output, self.redis_url)) for case in self.cases]
        for _, config in configs:  # every case's drivers fit under ulimit -n, before any case starts
            check_open_files(config.load, self.say, api=True)
        runner = Runner(configs[0][1], say=self.say, run_id=self.run_id)
        pythons: dict[str, Path] = {}  # a backend's environment, or a pinned set's (``versions``)
        for _, config in configs:
            runner.config = config
            for name in config.backends:
                key = environment_key(name, config.versions)
                if key not in pythons:  # each environment checked (its lock hashed) once, not once a case
                    pythons[key] = runner.environment(name)
        result.environments = {n: versions(str(p)) for n, p in pythons.items()}
        placement = configs[0][1].placement
        first = configs[0][1]
        with provide_redis(self.redis_url, self.out_dir, cpus=placement.redis, fsync=first.redis_fsync,
                           say=self.say) as redis:
            result.redis = redis.info
            for case, config in configs:
                self.say(f"case {case.index}: {case.label}")
                runner.config = config
                if redis.broker is not None:  # each case's --redis-fsync on the embedded broker
                    redis.broker.set_fsync(config.redis_fsync)
                python = pythons[environment_key(case.params["backend"], config.versions)]
                data = self._repeat(case, partial(runner.run_case, case.index, case.params["backend"], python, redis))
                result.cases.append(self._finish(case, data))
                self._write(result)

    def _http(self, result: Result) -> None:
        from taskbench.harness.processes.envs import ensure_env, ensure_pinned, versions
        from taskbench.scenarios import http

        # each case's server runs in its environment: the lock's `servers` extra, or a pinned set of versions
        names = dict.fromkeys(str(case.params.get("environment", "servers")) for case in self.cases)
        pythons = {name: ensure_env(name) if name == "servers" else ensure_pinned(name) for name in names}
        result.environments = {name: versions(str(python)) for name, python in pythons.items()}
        placement = Placement.parse("auto")
        for case in self.cases:
            self.say(f"case {case.index}: {case.label}")
            python = pythons[str(case.params.get("environment", "servers"))]
            with progress.phase(f"case {case.index} of {len(self.cases)}: {case.label}"):
                data = self._repeat(case, partial(http.run_case, case, python, self.out_dir, placement, self.say))
            result.cases.append(self._finish(case, data))
            self._write(result)

    def _celery(self, result: Result) -> None:
        from taskbench.harness.brokers.redis import provide_redis
        from taskbench.harness.processes.envs import ensure_env, versions
        from taskbench.scenarios import celery_pools

        python = ensure_env("celery")
        result.environments = {"celery": versions(str(python))}
        with provide_redis(self.redis_url, self.out_dir, say=self.say) as redis:
            result.redis = redis.info
            for case in self.cases:
                self.say(f"case {case.index}: {case.label}")
                with progress.phase(f"case {case.index} of {len(self.cases)}: {case.label}"):
                    data = self._repeat(case, partial(celery_pools.run_case, case, python, redis.broker_url,
                                                      self.out_dir, self.run_id, self.say))
                result.cases.append(self._finish(case, data))
                self._write(result)

    # -- bookkeeping -----------------------------------------------------------------------

    def _repeat(self, case: Case, run_once: Callable[[], CaseT]) -> CaseT:
        runs = []
        total = int(case.params.get("repeat", 1))
        for nth in range(total):
            if total > 1:
                self.say(f" run {nth + 1} of {total}")
            runs.append(run_once())
        return combine_runs(runs, RANKED_BY[self.scenario.kind])

    @staticmethod
    def _finish(case: Case, data: CaseT) -> CaseT:
        data.index = case.index
        data.label = data.label or case.label
        data.params = case.params
        data.limits_asked = {k: LimitAsked(cpu=v.cpu, memory_mb=v.memory_mb) for k, v in case.limits.items()}
        data.article = case.article
        return data

    def _write(self, result: Result) -> None:
        from taskbench.harness.commands.run import write_result

        write_result(self.result_path(), result)


def combine_runs(runs: list[CaseT], figure: str) -> CaseT:
    """Several runs of one case as one row: the run with the median ``figure``, the spread, every run.

    Correctness is not averaged away: lost, duplicated and unexpected tasks add up over the runs, and a run
    that failed makes the case fail.
    """
    if len(runs) == 1:
        return runs[0]
    ordered = sorted(runs, key=lambda r: float(r.summary.figure(figure) or 0.0))
    chosen = ordered[len(ordered) // 2].model_copy(deep=True)
    summary = chosen.summary
    numbers = [float(v) for v in (r.summary.figure(figure) for r in runs) if v is not None]
    if numbers:
        summary.spread = Spread(runs=len(runs), figure=figure, min=min(numbers), max=max(numbers))
    if any(r.summary.lost is not None for r in runs):
        summary.lost = sum(r.summary.lost or 0 for r in runs)
    if any(r.summary.duplicated is not None for r in runs):
        summary.duplicated = sum(r.summary.duplicated or 0 for r in runs)
    if any(r.summary.extra_executions is not None for r in runs):
        summary.extra_executions = sum(r.summary.extra_executions or 0 for r in runs)
    if any(r.summary.unexpected is not None for r in runs):
        summary.unexpected = sum(r.summary.unexpected or 0 for r in runs)
    statuses = [r.status for r in runs]
    chosen.status = "failed" if "failed" in statuses else next((s for s in statuses if s != "ok"), "ok")
    chosen.failures = [f for r in runs for f in r.failures]
    chosen.repeats = [RepeatRun(summary=r.summary, status=r.status) for r in runs]
    return chosen


def queue_config(case: Case, output: Path, redis_url: str | None) -> Any:
    """The RunConfig of a queue case: its parameters over the schema's defaults."""
    from taskbench import params
    from taskbench.harness.config import RunConfig, load_spec
    from taskbench.harness.faults.kinds import Fault

    p = {**params.defaults("queue"), **case.params}
    return RunConfig(
        backends=(p["backend"],), workload=p["workload"], load=load_spec(p), workers=p["workers"],
        concurrency=p["concurrency"], enqueue_mode=p["enqueue_mode"], io_delay=p["io_delay"],
        cpu_iterations=p["cpu_iterations"], redis_url=redis_url, broker=p["broker"], output=output,
        redis_fsync=p["redis_fsync"], broker_delay=p["broker_delay"],
        postgres_durability=p["postgres_durability"],
        warmup=p["warmup"], drain_timeout=p["drain_timeout"],
        drain_stall=p["drain_stall"], placement=Placement.parse("auto"),
        limits=case.limits, task_timeout=p["task_timeout"], enqueue_timeout=p["enqueue_timeout"],
        idempotency=p["idempotency"], fault=Fault.parse(p["fault"]) if p["fault"] else None,
        restart_workers=p["restart_workers"], options=p["options"] or {},
        producer_threads=p["producer_threads"], phases=case.phases, scrape_api=p["scrape_api"],
        versions=p["versions"],
    )
