"""``taskbench choose``: every criterion a user weighs, measured per backend by the runs that exist, into
one :class:`~taskbench.results.choose.ChooseResult`.

1. **the highest sustainable rate**: the search of ``--find-max-rate`` (:func:`.rate_search.search_run`),
   its bracket as the spread;
2. **the end-to-end p95 at half that rate, and the memory**: one soak (``run --soak``) per backend at half
   its sustainable rate: the p95 of the whole soak, the spread of its windows' p95, and the task
   processes' memory growth with its interval;
3. **the drain rate**: ``taskbench drain`` (a queue filled beforehand, one worker), median and range of
   its rounds;
4. **faults**: a ``kill-worker`` and a ``restart-broker`` case per backend (the fault matrix's settings:
   an open load for 4.5 s, the fault 2 s in, a 3 s task timeout so redeliveries come within the drain),
   each judged by the backend's own promise and its bounds (:func:`taskbench.harness.faults.verdict.judge`).

Each step's runs write their own result files under the choose run's folder; the figures are copied from
them with the file named (``Cell.source``).
"""

from __future__ import annotations

import datetime as dt
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from taskbench import backends as registry
from taskbench.driver import LoadSpec
from taskbench.harness.commands.drain import run_drain
from taskbench.harness.commands.rate_search import search_run
from taskbench.harness.commands.run import Runner, stamp
from taskbench.harness.config import RunConfig
from taskbench.harness.faults.kinds import Fault
from taskbench.harness.faults.verdict import judge
from taskbench.harness.load.search import Objective
from taskbench.harness.machine import commit_info, machine_info
from taskbench.harness.processes.envs import project_root
from taskbench.harness.soak.plan import SoakSpec
from taskbench.results import QueueCase, Result
from taskbench.results.choose import BackendChoice, Cell, ChooseResult, FaultCell

Say = Callable[[str], None]
FAULTS = ("kill-worker@2", "restart-broker@2")


@dataclass(frozen=True, kw_only=True)
class Budget:
    """How long each measurement runs: ``QUICK`` and ``FULL`` (``choose --quick`` and ``choose``)."""

    step_s: float
    settle_s: float
    max_steps: int
    start_rate: float
    soak_s: float
    drain_tasks: int
    drain_rounds: int
    fault_duration_s: float = 4.5

    def to_dict(self) -> dict[str, float]:
        return {k: float(v) for k, v in self.__dict__.items()}


#: the search's steps as short as its objective allows (3 s, 1 s to settle), a 20 s soak, one drain round
QUICK = Budget(step_s=3.0, settle_s=1.0, max_steps=6, start_rate=100.0, soak_s=20.0, drain_tasks=1000,
               drain_rounds=1)
#: the search's default steps (10 s), a 2 min soak, three drain rounds (a median and a range)
FULL = Budget(step_s=10.0, settle_s=3.0, max_steps=10, start_rate=100.0, soak_s=120.0, drain_tasks=3000,
              drain_rounds=3)


def durable_backends() -> list[str]:
    """Every backend whose accepted task survives its API (not ``background``, not an unsafe wiring)."""
    return [name for name in registry.available()
            if registry.info(name).durable and registry.info(name).has_worker and not registry.info(name).unsafe]


def _case(result: Result, backend: str) -> QueueCase | None:
    return next((c for c in result.cases if isinstance(c, QueueCase) and c.backend == backend), None)


def _quartiles(values: Sequence[float]) -> tuple[float, float]:
    if len(values) < 2:
        return values[0], values[0]
    q = statistics.quantiles(values, n=4)
    return q[0], q[2]


def rate_cell(case: QueueCase | None, source: str) -> Cell:
    search = case.rate_search if case is not None else None
    if search is None:
        reason = "; ".join(case.failures[:1]) if case is not None else "no case"
        return Cell(unit="req/s", note=f"no search: {reason}", source=source)
    return Cell(value=search.rate, low=search.rate, high=search.upper, unit="req/s",
                spread="the search's bracket: the highest rate that met the objective .. the lowest that missed it",
                note=f"confidence {search.confidence}" + (f": {search.note}" if search.note else ""), source=source)


def soak_cells(case: QueueCase | None, source: str) -> tuple[Cell, Cell]:
    """The e2e p95 at half the rate (the soak's windows' p95 quartiles as the spread) and the memory growth."""
    if case is None or case.audit is None or case.soak is None:
        note = "; ".join(case.failures[:1]) if case is not None else "not run"
        return Cell(unit="ms", note=note, source=source), Cell(unit="MB/h", note=note, source=source)
    windows = [v for v in case.soak.series.get("e2e_p95_ms", []) if v is not None]
    low, high = _quartiles(windows) if windows else (None, None)
    e2e = Cell(value=case.audit.end_to_end_ms.p95, low=low, high=high, unit="ms",
               spread=f"25th..75th percentile of the p95 of the soak's {len(windows)} windows",
               note=f"at {case.soak.rate:.3g} req/s for {case.soak.duration_s:g} s", source=source)
    growth = case.soak.growth.get("tasks_mb")
    if growth is None:
        return e2e, Cell(unit="MB/h", note="too few points to fit", source=source)
    memory = Cell(value=growth.slope_per_h, low=growth.low_per_h, high=growth.high_per_h, unit="MB/h",
                  spread="95 % interval of the Theil-Sen slope",
                  note=f"at {growth.level:.0f} MB" + (f"; drift beyond {growth.bound_text}" if growth.drift else ""),
                  source=source)
    return e2e, memory


def drain_cell(rows: list[dict[str, object]], backend: str, source: str) -> Cell:
    rates = [float(r["drain_per_s"]) for r in rows  # type: ignore[arg-type]
             if r.get("backend") == backend and r.get("drain_per_s") is not None]
    if not rates:
        return Cell(unit="tasks/s", note="no drain round finished", source=source)
    return Cell(value=statistics.median(rates), low=min(rates), high=max(rates), unit="tasks/s",
                spread=f"min..max of {len(rates)} round(s)", source=source)


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
    """Runs every measurement of ``choose`` for ``backends`` under ``budget``; :meth:`run` returns the record."""

    def __init__(self, backends: Sequence[str], budget: Budget, output: Path, *, quick: bool, say: Say = print,
                 command: str = "") -> None:
        self.backends = list(backends)
        self.budget = budget
        self.run_id = f"choose-{stamp()}"
        self.out = output / self.run_id
        self.quick = quick
        self.say = say
        self.command = command
        self.base = RunConfig(backends=tuple(self.backends), output=self.out, warmup=50)

    def _run(self, cfg: RunConfig, run_id: str) -> tuple[Result, str]:
        runner = Runner(cfg, say=self.say, run_id=run_id)
        return runner.run(), str(runner.result_path())

    def run(self) -> ChooseResult:
        began = time.monotonic()
        b = self.budget
        record = ChooseResult(run_id=self.run_id, quick=self.quick, command=self.command, budget=b.to_dict(),
                              started=dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
                              machine=machine_info(), commit=commit_info(project_root()))
        choices = {name: BackendChoice(backend=name, broker=self.base.broker_for(name)) for name in self.backends}
        for name, choice in choices.items():
            delivery = registry.info(name).delivery_on(choice.broker, self.base.promise_settings(name))
            choice.promise = f"{delivery.guarantee}: {delivery.recovery}"
        self.say(f"choose: 1/4 the highest sustainable rate of {', '.join(self.backends)}")
        objective = Objective(step_s=b.step_s, settle_s=b.settle_s, max_steps=b.max_steps, start_rate=b.start_rate)
        searched = search_run(self.base, objective=objective, say=self.say, run_id="search")
        source = str(self.out / "search" / "result.json")
        record.results.append(source)
        for name, choice in choices.items():
            case = _case(searched, name)
            choice.rate = rate_cell(case, source)
            versions = searched.environments.get(name, {})
            choice.version = str(versions.get(name) or versions.get(registry.info(name).extra) or "")
        self.say("choose: 2/4 a soak at half the sustainable rate (latency, memory)")
        for name, choice in choices.items():
            if not choice.rate.value:
                choice.e2e_p95 = Cell(unit="ms", note="no sustainable rate to halve")
                choice.memory = Cell(unit="MB/h", note="no sustainable rate to halve")
                continue
            half = max(1.0, choice.rate.value / 2)
            soak = SoakSpec(duration_s=b.soak_s, rate_source=f"half the sustainable {choice.rate.value:g}/s")
            load = LoadSpec(model="open", rate=half, duration=b.soak_s)
            cfg = replace(self.base, backends=(name,), load=load, soak=soak)
            result, path = self._run(cfg, f"half-{name}")
            record.results.append(path)
            choice.e2e_p95, choice.memory = soak_cells(_case(result, name), path)
        self.say("choose: 3/4 the drain rate")
        rows = run_drain(self.backends, tasks=b.drain_tasks, concurrency=self.base.concurrency, ledger_modes=[True],
                         redis_url=None, output=self.out, say=self.say, repeat=b.drain_rounds)
        drains = sorted(self.out.glob("drain-*/drain.json"))
        drain_source = str(drains[-1]) if drains else ""
        record.results.append(drain_source)
        for name, choice in choices.items():
            choice.drain = drain_cell(rows, name, drain_source)
        self.say(f"choose: 4/4 faults: {', '.join(FAULTS)}")
        for fault in FAULTS:
            cfg = self._fault_config(fault, {n: c.rate.value for n, c in choices.items()})
            result, path = self._run(cfg, fault.split("@")[0])
            record.results.append(path)
            for name, choice in choices.items():
                choice.faults.append(fault_cell(_case(result, name), fault, path))
        record.backends = list(choices.values())
        record.finished = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
        record.elapsed_s = round(time.monotonic() - began, 1)
        return record

    def _fault_config(self, fault: str, rates: dict[str, float | None]) -> RunConfig:
        """The fault matrix's settings (scenarios/files/faults.toml): open load, the fault 2 s in, a 3 s task
        timeout, each library's quick recovery (``Options.quick_recovery``: with its defaults a library may
        give a dead worker's jobs half an hour to come back, and the drain would wait for them); the rate is
        the lowest half-sustainable rate of the backends (one load for all of them), at most 300/s, at least 20/s."""
        known = [r / 2 for r in rates.values() if r]
        rate = max(20.0, min([300.0, *known]))
        load = LoadSpec(model="open", rate=rate, users=50, duration=self.budget.fault_duration_s)
        return replace(self.base, load=load, fault=Fault.parse(fault), warmup=20, task_timeout=3.0,
                       options=self.base.quick_recovery(),
                       drain_timeout=40.0, drain_stall=16.0,
                       restart_workers=fault.startswith("restart-broker"))
