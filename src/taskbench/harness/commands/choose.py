"""``taskbench choose``: screen every candidate, then measure the finalists, for the user's task, rate,
objective and guarantee; one :class:`~taskbench.results.choose.ChooseResult`.

A consultant screens first, then studies the finalists; each stage measures only where it decides
something (docs/choose.md says why each stage measures what it does):

1. **promise** (no load): a backend whose stated promise (the registry's, with the run's settings) is
   weaker than ``--promise`` is shown, not measured;
2. **screen**: one worker of each remaining backend drains the user's task from a filled queue, no HTTP
   (:func:`taskbench.harness.commands.drain.drain_of`): its ceiling, its CPU a task (worker and broker)
   and its memory;
3. **scale**: the best few drain again with 2 .. ``--max-workers`` workers: how many workers the rate
   needs, and what they cost;
4. **finalists**: the best two or three for the rate (``background`` too, when the promise allows it):
   the sustainable rate through the HTTP API, searched from the rate asked (or from half the drain's
   ceiling), its first step giving the e2e p95 at that rate; then a ``kill-worker`` and a
   ``restart-broker`` case, judged by each backend's own promise; the default budget adds a soak of the
   best one for its memory.

Each stage's runs write their own files under the choose run's folder (``screen/``, ``scale/``,
``search-<backend>/``, ``kill-worker/``, ``restart-broker/``, ``soak-<backend>/``); each figure names its file.
"""

from __future__ import annotations

import datetime as dt
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from taskbench import backends as registry
from taskbench.driver import LoadSpec
from taskbench.harness import HarnessError
from taskbench.harness.brokers.redis import provide_redis
from taskbench.harness.case import own_task
from taskbench.harness.commands.drain import drain_of
from taskbench.harness.commands.rate_search import search_run
from taskbench.harness.commands.run import Runner, stamp
from taskbench.harness.config import RunConfig
from taskbench.harness.faults.kinds import Fault
from taskbench.harness.faults.verdict import judge
from taskbench.harness.load.search import Objective
from taskbench.harness.machine import commit_info, machine_info
from taskbench.harness.processes.envs import ensure_env, project_root
from taskbench.harness.soak.plan import SoakSpec
from taskbench.results import QueueCase, Result
from taskbench.results.choose import (
    HEADROOM,
    Candidate,
    ChooseResult,
    Constraints,
    Drain,
    FaultCell,
    best_drain,
    drain_from_row,
    judge_candidate,
    meets_promise,
    order_key,
    p95_cell,
    rate_cell,
    soak_memory,
    workers_for,
    workers_text,
)

Say = Callable[[str], None]
FAULTS = ("kill-worker@2", "restart-broker@2")
NO_QUEUE = "background"


@dataclass(frozen=True, kw_only=True)
class Budget:
    """How long each stage measures: ``QUICK`` and ``FULL`` (``choose --quick`` and ``choose``)."""

    drain_tasks: int
    drain_s: float
    #: how many of the screened go on to the scale, and how many of those become finalists
    scaled: int
    finalists: int
    step_s: float
    settle_s: float
    max_steps: int
    fault_duration_s: float
    #: 0: no soak
    soak_s: float

    def to_dict(self) -> dict[str, float]:
        return {k: float(v) for k, v in self.__dict__.items()}

    def estimate_s(self, screened: int, workers: int) -> dict[str, float]:
        """Seconds each stage should take here for ``screened`` backends (a worker's start and the enqueue
        count about 8 s a drain; a search step drains its backlog before the next)."""
        drain = self.drain_s + 5
        scaled = min(self.scaled, screened)
        finalists = min(self.finalists, scaled)
        return {"screen": screened * drain, "scale": scaled * max(0, workers - 1) * drain,
                "finalist": finalists * (self.max_steps * (self.step_s + 1) + 8)
                + (len(FAULTS) * (self.fault_duration_s + 10) if finalists else 0)
                + (self.soak_s + 15 if self.soak_s else 0)}


#: a short drain, the two best to scale and to the finals, 3 s search steps, no soak
QUICK = Budget(drain_tasks=2000, drain_s=5.0, scaled=2, finalists=2, step_s=3.0, settle_s=1.0, max_steps=4,
               fault_duration_s=4.5, soak_s=0.0)
#: longer drains and steps, three finalists, a one-minute soak of the best
FULL = Budget(drain_tasks=5000, drain_s=12.0, scaled=3, finalists=3, step_s=6.0, settle_s=2.0, max_steps=6,
              fault_duration_s=6.0, soak_s=60.0)


def durable_backends() -> list[str]:
    """Every backend whose accepted task survives its API (not ``background``, not an unsafe wiring)."""
    return [name for name in registry.available()
            if registry.info(name).durable and registry.info(name).has_worker and not registry.info(name).unsafe]


def candidates() -> list[str]:
    """What ``choose`` weighs by default: ``background`` (is a queue needed at all?) and every durable one."""
    return [NO_QUEUE, *durable_backends()]


def usable_cores() -> int:
    import os

    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def _case(result: Result, backend: str) -> QueueCase | None:
    return next((c for c in result.cases if isinstance(c, QueueCase) and c.backend == backend), None)


def fault_cell(case: QueueCase | None, fault: str, source: str) -> FaultCell:
    if case is None or case.fault is None:
        return FaultCell(fault=fault, note="not run" if case is None else "; ".join(case.failures[:1]), source=source)
    record = case.fault
    cell = FaultCell(fault=record.fault, injected=record.injected, source=source,
                     recovered_s=record.executing_again_s, note=record.note or record.error or "")
    if not record.injected or case.audit is None or record.promise is None:
        return cell
    verdict = judge(record.promise, lost=case.audit.lost, duplicated=case.audit.duplicated,
                    recovered=record.recovered, kills=len(record.kills) or 1)
    return cell.model_copy(update={"kept": not verdict.broken, "lost": case.audit.lost,
                                   "duplicated": case.audit.duplicated, "broken": verdict.broken,
                                   "within": verdict.within})


class Chooser:
    """Runs the stages of ``choose`` for ``names`` under ``budget``; :meth:`run` returns the record."""

    def __init__(self, names: Sequence[str], base: RunConfig, constraints: Constraints, budget: Budget,
                 output: Path, *, quick: bool, say: Say = print, command: str = "") -> None:
        self.names = list(names)
        self.budget = budget
        self.k = constraints
        self.run_id = f"choose-{stamp()}"
        self.out = output / self.run_id
        self.quick = quick
        self.say = say
        self.command = command
        self.base = replace(base, backends=tuple(self.names), output=self.out, warmup=50)
        self.began = time.monotonic()
        self._plan: dict[str, float] = {}
        self._stage_began: dict[str, float] = {}
        self._pace = 1.0

    def _progress(self, stage: str, text: str, done: float = 0.0) -> None:
        """The stage, what it does, and the time left: the budget's estimate, scaled by how much slower or
        faster this machine went than the estimate so far (``done``: the share of this stage behind)."""
        now = time.monotonic()
        spent = now - self.began
        order = ["screen", "scale", "finalist"]
        self._stage_began.setdefault(stage, now)
        in_stage = now - self._stage_began[stage]
        planned = self._plan.get(stage, 0.0)
        if done > 0 and planned > 0:  # this stage's own pace, once some of it ran
            self._pace = max(0.25, min(4.0, in_stage / (done * planned)))
        later = sum(v for s, v in self._plan.items() if order.index(s) > order.index(stage))
        left = self._pace * (later + max(0.0, planned * (1 - done) if done else planned - in_stage))
        number = order.index(stage) + 2
        self.say(f"choose {number}/4 {stage}: {text} (about {max(0, left) / 60:.0f} min left, {spent / 60:.1f} min in)")

    def _run(self, cfg: RunConfig, run_id: str) -> tuple[Result, str]:
        runner = Runner(cfg, say=self.say, run_id=run_id)
        return runner.run(), str(runner.result_path())

    def run(self) -> ChooseResult:
        b, k = self.budget, self.k
        record = ChooseResult(run_id=self.run_id, quick=self.quick, command=self.command, budget=b.to_dict(),
                              constraints=k, started=dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
                              machine=machine_info(), commit=commit_info(project_root()))
        record.candidates = [self._promise(name) for name in self.names]
        self.say("choose 1/4 promise: " + "; ".join(
            f"{c.backend} {c.guarantee}" for c in record.candidates) + f" (asked: {k.promise})")
        by_name = {c.backend: c for c in record.candidates}
        screened = [c for c in record.candidates if c.has_worker and meets_promise(c, k.promise)]
        for c in record.candidates:
            if not meets_promise(c, k.promise):
                c.left = judge_candidate(c, k).reason
        self._plan = b.estimate_s(len(screened), k.max_workers)
        timed: dict[str, float] = {}
        began = time.monotonic()
        pythons = {c.backend: ensure_env(registry.info(c.backend).extra) for c in record.candidates
                   if meets_promise(c, k.promise)}
        own_task.prepare(replace(self.base, backends=tuple(pythons)), pythons, self.say)
        with provide_redis(None, self.out, say=self.say) as redis:
            for i, c in enumerate(screened):
                self._progress("screen", f"one worker of {c.backend} drains your task ({i + 1}/{len(screened)})",
                               done=i / len(screened))
                c.stage = "screen"
                c.drains.append(self._drain(c, pythons[c.backend], redis, 1, "screen"))
            timed["screen"] = time.monotonic() - began
            ranked = sorted((c for c in screened if c.ceiling), key=self._screen_key)
            for c in screened:
                if not c.ceiling:
                    c.left = judge_candidate(c, k).reason
            scaled = ranked[:b.scaled]
            for c in ranked[b.scaled:]:
                c.left = (f"the {b.scaled} best of the screen went on ("
                          + ("the fewest workers by one worker's rate, then the least CPU a task" if k.rate is not None
                             else "the highest rates") + ")")
            began = time.monotonic()
            for c in scaled:
                c.stage = "scale"
                for workers in range(2, k.max_workers + 1):
                    self._progress("scale", f"{workers} workers of {c.backend} drain your task")
                    c.drains.append(self._drain(c, pythons[c.backend], redis, workers, "scale"))
            timed["scale"] = time.monotonic() - began
        finalists = self._finalists(scaled)
        if NO_QUEUE in by_name and meets_promise(by_name[NO_QUEUE], k.promise):
            finalists.append(by_name[NO_QUEUE])  # no worker to screen: its tasks run in the API process
        began = time.monotonic()
        self._finals(finalists, record)
        timed["finalist"] = time.monotonic() - began
        for c in finalists:
            c.left = judge_candidate(c, k).reason
        record.stages_s = {name: round(seconds, 1) for name, seconds in timed.items()}
        record.finished = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
        record.elapsed_s = round(time.monotonic() - self.began, 1)
        return record

    def _promise(self, name: str) -> Candidate:
        meta = registry.info(name)
        broker = self.base.broker_for(name)
        delivery = meta.delivery_on(broker, self.base.promise_settings(name))
        how = "a task dies with the API process" if not meta.has_worker else delivery.recovery
        return Candidate(backend=name, broker=broker, guarantee=delivery.guarantee, promise=how,
                         has_worker=meta.has_worker)

    def _drain(self, c: Candidate, python: Path, redis: Any, workers: int, stage: str) -> Drain:
        tasks = self.budget.drain_tasks * workers
        try:
            row = drain_of(self.base, c.backend, python, redis, self.out / stage, workers=workers, tasks=tasks,
                           seconds=self.budget.drain_s, say=self.say)
        except (HarnessError, OSError, ValueError) as exc:
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            return Drain(workers=workers, tasks=tasks, note=f"the drain failed: {first}")
        c.version = str(row.get("version") or c.version)
        return drain_from_row(row, row.get("file", ""))

    def _screen_key(self, c: Candidate) -> tuple[float, ...]:
        """Who goes on to the scale: at a rate, the fewest workers by one worker's rate, then the least CPU
        a task; without one, the highest rate."""
        ceiling = c.ceiling or 0.0
        if self.k.rate is None or not ceiling:
            return (-ceiling,)
        one = c.drain(1)
        cpu = one.cpu_us if one is not None and one.cpu_us is not None else float("inf")
        return (math.ceil(self.k.rate / (ceiling * HEADROOM)), cpu)

    def _finalists(self, scaled: list[Candidate]) -> list[Candidate]:
        """The best of the scaled for the rate: those whose drains reach it, the fewest workers and the least
        CPU a task first (without a rate: the highest drain rate)."""
        k = self.k
        able: list[tuple[tuple[float, ...], Candidate]] = []
        for c in scaled:
            if k.rate is not None:
                workers = workers_for(c, k.rate, k.max_workers)
                if workers is None:
                    c.left = judge_candidate(c, k).reason
                    continue
                drain = c.drain(workers)
                cpu = drain.cpu_us if drain is not None and drain.cpu_us is not None else float("inf")
                able.append(((workers, cpu), c))
            else:
                top = best_drain(c, k.max_workers)
                able.append(((-(top.rate or 0) if top is not None else 0.0,), c))
        able.sort(key=lambda item: item[0])
        for _, c in able[self.budget.finalists:]:
            c.left = (f"the {self.budget.finalists} best of the scale went on (" +
                      ("the fewest workers, then the least CPU a task" if k.rate is not None else "the highest rates")
                      + ")")
        return [c for _, c in able[:self.budget.finalists]]

    def _workers(self, c: Candidate) -> int:
        if not c.has_worker:
            return 1
        if self.k.rate is not None:
            return workers_for(c, self.k.rate, self.k.max_workers) or self.k.max_workers
        top = best_drain(c, self.k.max_workers)
        return top.workers if top is not None else 1

    def _finals(self, finalists: list[Candidate], record: ChooseResult) -> None:
        b, k = self.budget, self.k
        for i, c in enumerate(finalists):
            c.stage = "finalist"
            c.workers = self._workers(c)
            top = best_drain(c, c.workers)
            start = k.rate if k.rate is not None else max(5.0, (top.rate if top and top.rate else 200.0) / 2)
            who = f"{c.backend} with {workers_text(c.workers)}" if c.has_worker else f"{c.backend} (no worker)"
            self._progress("finalist", f"{who}: the sustainable rate through the API from {start:.4g}/s "
                                       f"({i + 1}/{len(finalists)})")
            objective = Objective(max_e2e_p95_ms=k.p95_ms, step_s=b.step_s, settle_s=b.settle_s,
                                  max_steps=b.max_steps, start_rate=min(max(start, 5.0), 20_000.0))
            cfg = replace(self.base, backends=(c.backend,), workers=c.workers)
            searched = search_run(cfg, objective=objective, say=self.say, run_id=f"search-{c.backend}")
            source = str(self.out / f"search-{c.backend}" / "result.json")
            record.results.append(source)
            case = _case(searched, c.backend)
            c.sustainable = rate_cell(case, source)
            at = k.rate if k.rate is not None else (c.sustainable.value or start) / 2
            c.p95, c.p95_rate = p95_cell(case, at, source)
            versions = searched.environments.get(c.backend, {})
            c.version = c.version or str(versions.get(c.backend) or versions.get(registry.info(c.backend).extra) or "")
        queued = [c for c in finalists if c.has_worker]
        if queued:
            rate = self._fault_rate(queued)
            for fault in FAULTS:
                self._progress("finalist", f"{fault.split('@')[0]} at {rate:.4g}/s: "
                                           f"{', '.join(c.backend for c in queued)}")
                cfg = self._fault_config(fault, [c.backend for c in queued], max(c.workers or 1 for c in queued),
                                         rate)
                result, path = self._run(cfg, fault.split("@")[0])
                record.results.append(path)
                for c in queued:
                    c.faults.append(fault_cell(_case(result, c.backend), fault, path))
        if b.soak_s:
            meeting = [c for c in finalists if judge_candidate(c, k).meets]
            if meeting:
                best = min(meeting, key=lambda c: order_key(c, judge_candidate(c, k), k))
                rate = k.rate if k.rate is not None else max(5.0, (best.sustainable.value or 10) / 2)
                self._progress("finalist", f"a {b.soak_s:g} s soak of {best.backend} at {rate:.4g}/s (its memory)")
                soak = SoakSpec(duration_s=b.soak_s, rate_source=f"{rate:.4g}/s")
                load = LoadSpec(model="open", rate=rate, duration=b.soak_s)
                cfg = replace(self.base, backends=(best.backend,), workers=best.workers or 1, load=load, soak=soak)
                result, path = self._run(cfg, f"soak-{best.backend}")
                record.results.append(path)
                best.memory = soak_memory(_case(result, best.backend), path)

    def _fault_rate(self, queued: list[Candidate]) -> float:
        """One load for the fault cases of all finalists: the rate asked (each finalist sustained it), or
        without one, half the lowest sustainable rate among them, so the fault is what the case measures."""
        if self.k.rate is not None:
            return self.k.rate
        sustained = [c.sustainable.value for c in queued if c.sustainable.value]
        return max(5.0, min(sustained) / 2 if sustained else 50.0)

    def _fault_config(self, fault: str, names: list[str], workers: int, rate: float) -> RunConfig:
        """The fault matrix's settings (scenarios/files/faults.toml): open load, the fault 2 s in, a 3 s task
        timeout, each library's quick recovery (``Options.quick_recovery``: with its defaults a library may
        give a dead worker's jobs half an hour to come back, and the drain would wait for them)."""
        load = LoadSpec(model="open", rate=rate, users=50, duration=self.budget.fault_duration_s)
        base = replace(self.base, backends=tuple(names))
        return replace(base, load=load, fault=Fault.parse(fault), warmup=20, task_timeout=3.0, workers=workers,
                       options=base.quick_recovery(), drain_timeout=40.0, drain_stall=16.0,
                       restart_workers=fault.startswith("restart-broker"))
