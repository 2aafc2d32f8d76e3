"""The result vocabulary: a case's CPU and memory limits, the processes' own counters, the cleanup."""

from __future__ import annotations

from taskbench.results.model import Model


class LimitStats(Model):
    """What the cgroup saw (what ``docker stats`` would show), and the CPU the component used."""

    nr_periods: int | None = None
    nr_throttled: int | None = None
    throttled_s: float | None = None
    cpu_s: float | None = None
    wall_s: float | None = None
    memory_peak_bytes: int | None = None
    memory_failcnt: int | None = None
    oom_kills: int | None = None


class LimitRecord(Model):
    """A component's CPU/memory limit: asked, how it was applied, and the CPU share used under load."""

    component: str
    cpu: float | None = None
    memory_mb: int | None = None
    applied: bool = False
    method: str | None = None  # cgroup-v2, cgroup-v1, pinning, none, none asked
    notes: list[str] = []
    paths: list[str] = []
    pids: list[int] = []
    #: share of one CPU the component used while the load ran
    load_cpu: float | None = None
    stats: LimitStats = LimitStats()


class LimitAsked(Model):
    cpu: float | None = None
    memory_mb: int | None = None


class MetricsCheck(Model):
    """The processes' own counters against the ledger: succeeded must equal executions."""

    components: dict[str, dict[str, float | str]] = {}
    totals: dict[str, float] = {}
    ledger_executions: int = 0
    match: bool = False
    errors: list[str] = []
    note: str | None = None


class Cleanup(Model):
    kept: bool = False
    prefix: str | None = None
    patterns: list[str] = []
    deleted_keys: int | None = None
    purge: str | None = None
