"""One lifecycle for the processes of a case: start, wait until ready, limit, pin, measure CPU, stop.

``taskbench run`` (API + workers), every scenario kind (a server; celery workers), ``up``,
``ceiling`` and the tests' helpers start their processes through :class:`Stack`::

    with Stack(env, name=run_id, stop_timeout=10) as stack:
        stack.start("api", argv, logs / "api.log", role="api", cpus=[0])
        stack.wait_ready(lambda: healthy(port), timeout=60, what="the API answering /health")
        limits = stack.limit({"api": Limit(cpu=0.2)}, say)     # once ready: start-up runs unlimited
        with stack.measure() as window:                       # the CPU each limited component used
            run_load(...)
    records = stack.limit_records()                           # with cgroup stats and CPU shares

Leaving the block stops every process by its group (SIGTERM, then SIGKILL) and removes the cgroups.
``stop_timeout`` is the grace the components were given (their ``SHUTDOWN_TIMEOUT``: running tasks
finish in it); the SIGKILL comes :data:`STOP_MARGIN` seconds after it, so a component that uses its
whole grace still has time to close its connections and exit. A component killed anyway wrote its
threads' stacks to its log first (:mod:`taskbench.procgroup`).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Self

from taskbench.harness import HarnessError
from taskbench.harness.processes.cgroups import Cgroups, Limit, tree_cpu
from taskbench.harness.processes.peaks import Peaks
from taskbench.harness.processes.process_set import ProcessSet
from taskbench.harness.processes.rss import tree_sizes
from taskbench.ledger.recording.spool.keeper import keeper_for
from taskbench.procgroup import Managed
from taskbench.results import LimitRecord, LimitStats
from taskbench.wait import WaitTimeoutError, wait_until

Say = Callable[[str], None]


@dataclass
class _Limited:
    """A limited component: its record, and the CPU clock readings that give its shares."""

    record: LimitRecord
    pid: int
    cpu_at_start: float | None
    applied_at: float = field(default_factory=time.monotonic)


@dataclass
class Window:
    """A measured stretch (the load): its wall time, each limited component's CPU share in it, and the
    most processes each started component's tree held (itself and its descendants: a uvicorn parent and
    its workers, a Celery worker and its pool's forks), sampled every :data:`COUNT_INTERVAL` s."""

    seconds: float = 0.0
    cpu_share: dict[str, float] = field(default_factory=dict)
    processes: dict[str, int] = field(default_factory=dict)


#: seconds between two counts of the components' processes in a measured stretch (a count reads /proc)
COUNT_INTERVAL = 1.0


#: seconds past the components' grace before the SIGKILL: a worker that used its whole grace on a
#: task still closes its broker connections (through a slow or delayed broker) and exits
STOP_MARGIN = 10.0


class Stack:
    """Processes of one case, each in its own process group; limits per role; always stopped."""

    def __init__(self, env: Mapping[str, str], *, name: str, stop_timeout: float = 10.0) -> None:
        # what the ledger keeps for the workers started here (their spooled records), as the ledger decides
        self.spool = keeper_for(env)
        if self.spool is not None:
            env = {**env, **self.spool.env()}
            self.spool.know(env.get("TASKBENCH_REDIS_URL"))
        self.procs = ProcessSet(env, stop_timeout=stop_timeout + STOP_MARGIN)
        if self.spool is not None:
            self.procs.after_stop = self.spool.sweep
        try:
            self.cgroups = Cgroups(name)
        except BaseException:
            if self.spool is not None:
                self.spool.close()
            raise
        self.roles: dict[str, str] = {}  # process name -> the limit set's component (api, workers, ...)
        self._limited: dict[str, _Limited] = {}

    # -- processes -----------------------------------------------------------------------------

    def start(self, name: str, argv: Sequence[str], log: Path, *, role: str | None = None,
              cpus: list[int] | None = None, env: Mapping[str, str] | None = None) -> Managed:
        """Start one process; ``role`` names the limit that applies to it (``api``, ``workers``, ...)."""
        if role is not None:
            self.roles[name] = role
        if self.spool is not None and env:
            self.spool.know(env.get("TASKBENCH_REDIS_URL"))
        return self.procs.start(name, argv, log, cpus=cpus, env=env)

    def adopt(self, proc: Managed) -> None:
        """A process started elsewhere (Prometheus) that must stop with the rest."""
        self.procs.procs.append(proc)

    def dead(self) -> list[Managed]:
        return self.procs.dead()

    def get(self, name: str) -> Managed:
        return self.procs.get(name)

    @property
    def exit_codes(self) -> dict[str, int | None]:
        return self.procs.exit_codes

    def died(self) -> str | None:
        """Why the stack cannot become ready: the first process that exited, with its log's end."""
        for proc in self.procs.dead():
            return (f"{proc.name} exited with code {proc.exit_code()} during start-up; its log "
                    f"({proc.log_path}) ends:\n{proc.tail()}")
        return None

    def wait_ready(self, ready: Callable[[], object], *, timeout: float, what: str,
                   interval: float = 0.05) -> None:
        """Wait until ``ready()`` holds; a process that exits, or the timeout, is a HarnessError."""
        try:
            wait_until(ready, timeout, what=what, interval=interval, abort=self.died)
        except WaitTimeoutError as exc:
            raise HarnessError(str(exc)) from None

    # -- limits and CPU ------------------------------------------------------------------------

    def limit(self, limits: Mapping[str, Limit], say: Say | None = None) -> dict[str, LimitRecord]:
        """Put each process whose role has a limit (and its children) in a cgroup of its own.

        Called once the stack is ready, as docker limits each container: start-up (imports) runs
        unlimited, the load does not.
        """
        for proc in list(self.procs.procs):
            limit = limits.get(self.roles.get(proc.name, ""))
            if limit is not None:
                self.limit_process(proc, limit, say)
        return self.limit_records()

    def limit_process(self, proc: Managed, limit: Limit, say: Say | None = None, *,
                      track: bool = True) -> LimitRecord:
        """Limit one process; ``track=False`` for a restarted one (limited as a restarted container
        is, but its CPU is not compared with the killed process's)."""
        raw = self.cgroups.apply(proc.name if track else f"{proc.name}-restarted", [proc.pid], limit)
        record = LimitRecord.model_validate(raw)
        if track:
            self._limited[proc.name] = _Limited(record=record, pid=proc.pid, cpu_at_start=tree_cpu(proc.pid))
        if not record.applied and say is not None:
            say(f"{proc.name}: limits {limit.describe()} not applied: " + "; ".join(record.notes))
        return record

    @contextlib.contextmanager
    def measure(self) -> Iterator[Window]:
        """The share of a CPU each limited component used over the block (at its limit: the bottleneck),
        and the most processes each component's tree held in it."""
        window = Window()
        before = {name: tree_cpu(item.pid) for name, item in self._limited.items()}
        started = time.monotonic()
        # made before the try: an interrupt (Ctrl-C) arriving as the block starts leaves the figures empty,
        # not a name unbound in the finally, whose UnboundLocalError hid the interrupt (exit 1, not 130)
        processes = Peaks(self._tree_sizes, interval=COUNT_INTERVAL, name="process-count")
        try:
            with processes:
                yield window
        finally:
            window.seconds = time.monotonic() - started
            window.processes = {name: count for name, count in processes.most.items() if count}
            for name, item in self._limited.items():
                used, start = tree_cpu(item.pid), before.get(name)
                if used is not None and start is not None and window.seconds > 0:
                    window.cpu_share[name] = (used - start) / window.seconds
                    item.record.load_cpu = window.cpu_share[name]

    def _tree_sizes(self) -> dict[str, int]:
        """Per running component, the processes of its tree now (a restarted one by its new pid)."""
        return tree_sizes({proc.name: proc.pid for proc in list(self.procs.procs) if proc.alive()})

    def limit_records(self) -> dict[str, LimitRecord]:
        """Every limited component's record, with its cgroup's figures and its CPU since it was limited."""
        out: dict[str, LimitRecord] = {}
        for name, item in self._limited.items():
            stats = LimitStats.model_validate(self.cgroups.stats(name))
            used = tree_cpu(item.pid)
            if used is not None and item.cpu_at_start is not None:
                stats.cpu_s = used - item.cpu_at_start
                stats.wall_s = time.monotonic() - item.applied_at
            item.record.stats = stats
            out[name] = item.record
        return out

    # -- stop ----------------------------------------------------------------------------------

    def stop(self) -> dict[str, int | None]:
        try:
            return self.procs.stop_all()
        finally:
            try:
                self.cgroups.release()
            finally:
                if self.spool is not None:  # what a killed worker spooled reaches the ledger before it is read
                    self.spool.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()
