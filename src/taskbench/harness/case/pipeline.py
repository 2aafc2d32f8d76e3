"""The steps of a case, in order: start -> warm-up -> load -> drain -> audit -> stop, then the verdict.

:class:`Pipeline` runs them, each step in a progress phase named after it (an interrupt names the step it
came in). The steps every kind of case shares are here (the drain's wait, the ledger's read and audit, the
drain's lines, the row and the status); what differs is in the hooks a subclass overrides: the reference
stack with a fault (:class:`taskbench.harness.case.reference.ReferenceCase`), the user's own service
(``run --target``), the collector of many drivers and ``run --nodes``.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Final

from taskbench.driver import LoadResult, LoadSpec
from taskbench.harness import progress
from taskbench.harness.case.audit import queue_status, queue_summary, read_ledger
from taskbench.harness.case.drain_wait import Drain, drain
from taskbench.harness.case.stop import stop_executors, stop_failures
from taskbench.harness.case.warm_up import WARMUP_PREFIX
from taskbench.harness.faults.injector import Injector
from taskbench.harness.load.backlog import origin_of
from taskbench.harness.processes.process_set import ProcessSet
from taskbench.harness.processes.stack import Stack
from taskbench.ledger import Ledger, audit
from taskbench.ledger.rows import Outcomes, Rows
from taskbench.results import AuditResult, QueueCase, Summary

Say = Callable[[str], None]

#: the steps, in the order :meth:`Pipeline.run` takes them
STEPS: Final = ("start", "warm-up", "load", "drain", "audit", "stop")
#: after a drain that did not end, seconds for a task finishing then to be counted late, not lost
LATE_GRACE = 2.0


@dataclass(frozen=True)
class Loaded:
    """What the load step hands the drain and the audit: the driver's result and its wall-clock bounds."""

    load: LoadResult
    start: float
    end: float


class Pipeline:
    """One case's steps. A subclass gives :meth:`start`, :meth:`load` and what else differs."""

    #: the warm-up's ids start with it, and the audit ignores them (None: the case has no warm-up)
    ignore_prefix: str | None = WARMUP_PREFIX
    #: after a drain that did not end, stop what runs the tasks before the audit (a cluster's collector
    #: cannot: its workers are a Deployment)
    stops_executors: bool = True
    late_grace: float = LATE_GRACE

    def __init__(self, case: QueueCase, *, label: str, client: Any, ledger: Ledger, say: Say,
                 stack: Stack | None, drain_timeout: float, drain_stall: float | None) -> None:
        self.case, self.label, self.client, self.ledger, self.say = case, label, client, ledger, say
        self.stack = stack
        self.drain_timeout, self.drain_stall = drain_timeout, drain_stall
        self.failures: list[str] = []
        self.warm_accepted = 0  # the warm-up's tasks, executed before the load
        self.drained = Drain(drained=False, deadline=0.0)
        self.drain_ok = False
        self.rows: Rows | None = None
        self.report: AuditResult | None = None
        self.stopped: list[str] = []  # what :meth:`stop_executors` stopped before the audit
        #: what the load arms that lasts through the drain (a fault's injector, a scrape of the API)
        self.through_drain = contextlib.ExitStack()
        #: the case's fault, armed by the load through the drain (None: no fault)
        self.injector: Injector | None = None

    # -- the pipeline ---------------------------------------------------------------------

    def run(self) -> QueueCase:
        """Every step in order; the clean-up whatever happened; the verdict."""
        try:
            with self.stack if self.stack is not None else contextlib.nullcontext():
                with self.step("start"):
                    self.start()
                self.warm_accepted = self.warm_up()
                with self.through_drain:
                    loaded = self.load()
                    if loaded is None:  # the load ended the case (its hook said why)
                        return self.case
                    with self.step("drain", total=len(loaded.load.accepted_ids), executed=self.executed,
                                   accepted=lambda: len(loaded.load.accepted_ids)):
                        # said inside the drain's phase: an interrupt after this line names the drain
                        self.say(self.draining_line(loaded))
                        self.drained = self.drain(loaded)
                self.audit_step(loaded)
                with self.step("stop"):
                    self.stop()
        finally:
            self.finish()
        self.judge(loaded)
        return self.case

    @contextlib.contextmanager
    def step(self, name: str, **figures: Any) -> Iterator[None]:
        """A step (or a part of one) as a progress phase: ``[label] name``."""
        with progress.phase(f"[{self.label}] {name}", **figures):
            yield

    def executed(self) -> int:
        """The load's tasks executed so far (the progress's count)."""
        return max(0, self.ledger.executed_count(self.client) - self.warm_accepted)

    @property
    def procs(self) -> Any:
        """The processes the drain watches (a ProcessSet, or a view with ``dead()`` and ``procs``)."""
        return self.stack.procs if self.stack is not None else ProcessSet({})

    def audit_step(self, loaded: Loaded) -> None:
        self.after_drain(loaded)
        if not self.drained.drained and self.stops_executors:
            time.sleep(self.late_grace)  # a straggler finishing now is counted late, not lost
            # what runs the tasks stops before the audit, so the drain, the audit and the metrics
            # give one number of tasks that never ran (the workers' counters as they stopped)
            with self.step("stop the workers"):
                self.stopped = self.stop_executors()
        with self.step("audit"):
            self.rows, read_failures = read_ledger(self.client, self.ledger, say=self.say)
            self.failures += read_failures
            self.report = self.audit(loaded)
        self.judge_drain()
        self.figures(loaded)

    def judge(self, loaded: Loaded) -> None:
        """The case's row, failures and status, once every process stopped."""
        case = self.case
        self.failures += self.stop_failures()
        case.audit = self.report
        self.failures += self.verdict()
        case.summary = self.summary(loaded)
        case.failures = self.failures
        report = self.report
        audit_ok = report is not None and (report.corrupt == 0 if self.figures_of_loss() else report.ok)
        case.status = queue_status(case.summary, audit_ok=audit_ok, drained=self.drain_ok, failures=self.failures,
                                   bounded=self.bounded())
        case.failures = self.failures  # with the reason of a failed status that no step had said

    # -- the steps' hooks -----------------------------------------------------------------

    def start(self) -> None:
        """Start the case's processes and wait until they are ready (nothing: they are someone else's)."""

    def warm_up(self) -> int:
        """A few requests before the load; how many were accepted."""
        return 0

    def load(self) -> Loaded | None:
        """The load (what it arms through the drain entered on :attr:`through_drain`); None ends the case."""
        raise NotImplementedError

    def draining_line(self, loaded: Loaded) -> str:
        return f"{loaded.load.ok} accepted at {loaded.load.rps:.0f} req/s; draining"

    def drain(self, loaded: Loaded) -> Drain:
        """Wait for the load's accepted tasks (and the warm-up's still queued)."""
        load = loaded.load
        return drain(self.procs, self.client, self.ledger, target=self.warm_accepted + len(load.accepted_ids),
                     accepted=load.accepted_ids, load_end=loaded.end, timeout=self.drain_timeout, say=self.say,
                     stall=self.drain_stall)

    def after_drain(self, loaded: Loaded) -> None:
        """What the case records once the drain ended, before the audit."""

    def record_fault(self) -> None:
        """The fault's record in the case; a fault that failed, or could not be injected, fails it."""
        injector = self.injector
        if injector is None:
            return
        record = self.case.fault = injector.record
        if record.error:
            self.failures.append(f"fault {record.fault}: {record.error}")
        elif not record.injected:
            self.failures.append(f"fault {record.fault}: {record.note}")

    @property
    def injected(self) -> bool:
        return self.case.fault is not None and self.case.fault.injected

    def stop_executors(self) -> list[str]:
        return stop_executors(self.procs, self.case.has_worker)

    def outcomes(self) -> Outcomes | None:
        """The executions' outcomes (a user's task's failures and CPU times) the audit reads beside the counts."""
        return None

    def audit(self, loaded: Loaded) -> AuditResult | None:
        """The ledger's rows against the ids the driver saw accepted (None: the ledger could not be read)."""
        rows, load = self.rows, loaded.load
        if rows is None:
            return None
        return audit(load.accepted_ids, rows.counts, rows.times, deadline=self.drained.deadline,
                     ignore_prefix=self.ignore_prefix, start=loaded.start, corrupt=rows.corrupt,
                     failed_ids=load.failed_ids, refused_ids=load.refused_ids(), outcomes=self.outcomes()).to_model()

    def indeterminate_words(self) -> str:
        """What the drain's line says of the accepted tasks that started and never finished ("": none)."""
        report = self.report
        if report is None or not report.indeterminate:
            return ""
        return f"{report.indeterminate} started and never finished (indeterminate: hung or cut, not lost)"

    def loss_excused(self) -> str | None:
        """Why a drain that did not end waited in vain for a loss the case allows (audited, not a failure
        of its own); None: it is a failure."""
        return None

    def judge_drain(self) -> None:
        """The drain's lines: failures, or said when the loss they count is one the case allows."""
        drained = self.drained
        lines = drained.lines(None if self.report is None else self.report.lost, self.indeterminate_words())
        excuse = None if drained.drained else self.loss_excused()
        self.drain_ok = drained.drained or excuse is not None
        if excuse is not None:
            self.say(f"{'; '.join(lines)} ({excuse}: audited as lost)")
        else:
            self.failures += lines

    def figures(self, loaded: Loaded) -> None:
        """The case's figures read from the audited rows (a fault's recovery, the metrics, the phases)."""

    def stop(self) -> None:
        """Stop the case's processes (the API first, then the workers)."""
        if self.stack is not None:
            self.stack.stop()

    def finish(self) -> None:
        """After every process stopped, whatever happened: the exit codes, the clean-up, the clients closed."""
        if self.stack is not None:
            self.case.exit_codes = dict(self.stack.exit_codes)
        self.clean_up()
        self.client.close()

    def clean_up(self) -> None:
        """Delete what the case wrote."""

    def stop_failures(self) -> list[str]:
        """What the stopped processes' exit codes say."""
        return stop_failures(self.stack.procs) if self.stack is not None else []

    def verdict(self) -> list[str]:
        """What the case's promise says of its lost and duplicated tasks."""
        return []

    def summary(self, loaded: Loaded) -> Summary:
        assert self.case.load is not None
        load, rows = loaded.load, self.rows
        # the load ends at its last answer, not when its processes were joined
        end = origin_of(load) + load.elapsed_s if load.first_send else loaded.end
        finished = None if rows is None else sum(
            1 for task_id in load.accepted_ids if (row := rows.times.get(task_id)) is not None and row[2] <= end)
        return queue_summary(self.case.load, self.report, load_start=loaded.start, drained=self.drained.drained,
                             fault=self.case.fault, load_end=end, finished_by_end=finished)

    def figures_of_loss(self) -> bool:
        """Lost and duplicated tasks are the case's figures (a fault, an unsafe wiring), not an audit failure."""
        return bool(self.case.unsafe)

    def bounded(self) -> bool:
        """Lost and duplicated tasks were judged by the promise's bounds (:meth:`verdict`), so inside them the
        status is ``ok``."""
        return False


def describe_load(spec: LoadSpec) -> str:
    """A load in one line, as a case says it before it starts."""
    if spec.schedule:
        return f"open model, {spec.users} users, {len(spec.schedule)} phases over {spec.scheduled_s:g} s"
    bounds = []
    if spec.requests:
        bounds.append(f"{spec.requests} requests")
    if spec.duration:
        bounds.append(f"{spec.duration:g} s")
    rate = f" at {spec.rate:g}/s" if spec.model == "open" else ""
    pace = f", each at most one every {spec.pace:.3g} s" if spec.pace else ""
    return f"{spec.model} model, {spec.users} users{rate}{pace}, {' or '.join(bounds)}"
