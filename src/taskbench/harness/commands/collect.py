"""The collector of a distributed run: wait for every driver's segment, merge them, drain, audit the ledger.

The same function ends a cluster run (the collector Job, ``taskbench collector``) and ``taskbench run
--nodes N`` (the harness, in the root network namespace): what the drivers publish under the run's prefix
(:mod:`taskbench.harness.commands.segment`) becomes one :class:`~taskbench.results.QueueCase` whose load is the
exact merge of theirs (:func:`~taskbench.driver.segments.merge_segments`), drained and audited as a
single-driver case is (the drain, the ledger's read and audit, the row and status of :mod:`.phases`).
"""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from taskbench import backends
from taskbench.driver.segments import Segment, merge_segments
from taskbench.harness.commands.phases import (
    WARMUP_PREFIX,
    drain,
    queue_status,
    queue_summary,
    read_ledger,
)
from taskbench.harness.commands.segment import wait_segments
from taskbench.harness.processes.process_set import ProcessSet
from taskbench.ledger import Ledger, audit
from taskbench.results import QueueCase, Result
from taskbench.settings import Settings

Say = Callable[[str], None]

#: after a drain that did not end, seconds for a task finishing then to be counted late, not lost (a run's)
LATE_GRACE = 2.0


@dataclass(frozen=True, kw_only=True)
class Collect:
    """What the collector needs besides the ledger: the case's identity and its waits."""

    settings: Settings  # backend, broker, run id, enqueue mode, concurrency
    workload: str
    drivers: int
    workers: int
    durable: bool
    durability: str
    segment_timeout: float  # the drivers' load, their start and their barrier
    drain_timeout: float
    drain_stall: float
    warm_accepted: int = 0  # the warm-up's tasks (ids prefixed "w"), executed before the load
    logs: str | None = None


def collect_case(client: Any, spec: Collect, *, say: Say, procs: Any = None,
                 stop_executors: Callable[[], list[str]] | None = None) -> tuple[QueueCase, list[Segment]]:
    """One queue case from the drivers' segments and the ledger; ``procs`` (the processes of ``run
    --nodes``: a ProcessSet, or a view of one with ``dead()`` and ``procs``) end the waits early when one
    dies. ``stop_executors``: after a drain that did not end, stop what runs the tasks before the audit (as
    a run does), so that the audit reads a ledger no worker writes any more; a cluster's collector cannot
    (the workers are a Deployment), and audits the ledger as it is then. The segments are returned for the
    result's record."""
    settings = spec.settings
    backend = backends.info(settings.backend)
    procs = procs if procs is not None else ProcessSet({})
    ledger = Ledger(settings.prefix)
    case = QueueCase(backend=settings.backend, broker=settings.broker, workload=spec.workload,
                     enqueue_mode=settings.enqueue_mode, durable=spec.durable, durability=spec.durability,
                     has_worker=backend.has_worker, workers=spec.workers if backend.has_worker else 0,
                     concurrency=settings.concurrency, run_id=settings.run_id, unsafe=backend.unsafe, logs=spec.logs)
    delivery = backend.delivery_on(settings.broker, case.promise_settings)
    case.delivery = f"{delivery.guarantee}: {delivery.recovery}"

    def died() -> str | None:
        dead = procs.dead()
        return ", ".join(f"{p.name} exited with code {p.exit_code()} (log: {p.log_path})" for p in dead) or None

    segments = wait_segments(client, settings.prefix, spec.drivers, timeout=spec.segment_timeout, abort=died)
    load = merge_segments(segments)
    case.load = load.to_model()
    say(f"{spec.drivers} driver(s): {load.ok} accepted at {load.rps:.0f} req/s; draining")
    load_start, load_end = load.first_send, load.last_response
    drained = drain(procs, client, ledger, target=spec.warm_accepted + len(load.accepted_ids),
                    accepted=load.accepted_ids, load_end=load_end, timeout=spec.drain_timeout, say=say,
                    stall=spec.drain_stall)
    failures = list(drained.failures)
    if not drained.drained and stop_executors is not None:
        time.sleep(LATE_GRACE)  # a straggler finishing now is counted late, not lost
        stop_executors()
    rows, read_failures = read_ledger(client, ledger, say=say)
    failures += read_failures
    report = None if rows is None else audit(
        load.accepted_ids, rows.counts, rows.times, deadline=drained.deadline, ignore_prefix=WARMUP_PREFIX,
        start=load_start, corrupt=rows.corrupt, failed_ids=load.failed_ids,
        refused_ids=load.refused_ids()).to_model()
    failures += drained.lines(None if report is None else report.lost)
    case.audit = report
    case.summary = queue_summary(case.load, report, load_start=load_start, drained=drained.drained, fault=None)
    audit_ok = report is not None and (report.corrupt == 0 if backend.unsafe else report.ok)
    case.failures = failures
    case.status = queue_status(case.summary, audit_ok=audit_ok, drained=drained.drained, failures=failures)
    return case, segments


def segments_record(segments: list[Segment]) -> list[dict[str, Any]]:
    """What a result keeps of each driver (its figures, not its ids): which share, where, how it fared."""
    out = []
    for seg in sorted(segments, key=lambda s: s.index):
        load = seg.load
        out.append({"index": seg.index, "node": seg.node, "requests": load.requests, "ok": load.ok,
                    "rps": round(load.rps, 1), "p50_ms": load.latency.percentile(50) / 1000,
                    "p99_ms": load.latency.percentile(99) / 1000, "max_utilization": round(load.max_utilization, 3),
                    "saturated": load.saturated})
    return out


def distributed_result(case: QueueCase, segments: list[Segment], *, header: Mapping[str, Any],
                       config: Mapping[str, Any]) -> Result:
    """The result file of a distributed run: one queue case, the run's parameters with each driver's share."""
    result = Result(kind="run", config={**config, "segments": segments_record(segments)}, **header)
    result.cases.append(case)
    result.finished = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
    return result
