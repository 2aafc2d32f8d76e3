"""The result vocabulary of ``taskbench choose``: per backend, one figure per criterion with its spread and
where it was measured, what the backend promises, and what it kept under each fault.

Every figure is copied from a result file of a run ``choose`` made (named in :attr:`Cell.source`); the
rankings and statements of the page are made from these figures when it is rendered
(:mod:`taskbench.report.choose`), never written by hand.
"""

from __future__ import annotations

from typing import Literal

from taskbench.results.model import Model


class Cell(Model):
    """One figure of one backend: ``value`` with its spread ``low``..``high`` (what the spread is: ``spread``)."""

    value: float | None = None
    low: float | None = None
    high: float | None = None
    unit: str = ""
    #: what low..high is ("the search's bracket", "p50..p99 of the soak's windows", "min..max of 3 rounds")
    spread: str = ""
    #: why there is no figure, or what qualifies it ("confidence marginal", "the case failed: ...")
    note: str = ""
    #: the result file (and case) the figure comes from
    source: str = ""


class FaultCell(Model):
    """A fault case: what was lost and duplicated, and whether that kept the backend's own promise."""

    fault: str
    injected: bool = False
    #: None: not judged (not injected, or the case did not run)
    kept: bool | None = None
    lost: int | None = None
    duplicated: int | None = None
    #: seconds until the executions came back to half the earlier rate (None: never, or not measured)
    recovered_s: float | None = None
    #: the verdict's lines: beyond the promise's bounds (broken), inside them (within)
    broken: list[str] = []
    within: list[str] = []
    note: str = ""
    source: str = ""


class BackendChoice(Model):
    backend: str
    broker: str = "redis"
    version: str = ""
    #: the backend's promise under a dead worker, from the registry (``guarantee: recovery``)
    promise: str = ""
    rate: Cell = Cell(unit="req/s")
    e2e_p95: Cell = Cell(unit="ms")
    drain: Cell = Cell(unit="tasks/s")
    memory: Cell = Cell(unit="MB/h")
    faults: list[FaultCell] = []

    @property
    def kept_every_promise(self) -> bool | None:
        """True when every fault case was judged and kept; False when one broke; None: none was judged."""
        judged = [f.kept for f in self.faults if f.kept is not None]
        if not judged:
            return None
        return all(judged)


class Ranking(Model):
    """One criterion's ranking: the backends best first with their figure, and the sentence made from them."""

    criterion: str
    order: list[str] = []
    statement: str = ""


class ChooseResult(Model):
    kind: Literal["choose"] = "choose"
    run_id: str
    started: str = ""
    finished: str = ""
    quick: bool = False
    command: str = ""
    machine: dict[str, object] = {}
    commit: dict[str, object] = {}
    #: the budgets the measurements ran under (search step, soak length, drain tasks, fault requests...)
    budget: dict[str, float] = {}
    backends: list[BackendChoice] = []
    rankings: list[Ranking] = []
    #: the result files of the runs behind the figures
    results: list[str] = []
    elapsed_s: float = 0.0

    def broken(self) -> list[str]:
        """``backend: line`` for every fault line beyond a backend's own promise."""
        return [f"{b.backend}: {line}" for b in self.backends for f in b.faults for line in f.broken]
