"""What a queue case adds for a user's own task (``--workload module:callable``, :mod:`taskbench.user_task`).

Before any case: ``--with`` installed into, and the callable imported in, every backend's environment
(:mod:`taskbench.harness.processes.task_env`). Per case: the request body carries the payload template
(:mod:`taskbench.payload`), the task processes' memory is sampled over the load and the drain
(:mod:`taskbench.harness.processes.rss`), the audit reads the failed executions and CPU times beside the
counts (:meth:`taskbench.ledger.Ledger.outcomes`), and the row gets them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from taskbench import backends, payload
from taskbench.harness.config import RunConfig
from taskbench.harness.faults.stalls import Patient, read_patiently, server_of
from taskbench.harness.processes import task_env
from taskbench.harness.processes.process_set import ProcessSet
from taskbench.harness.processes.rss import RssSampler
from taskbench.ledger import Ledger, Outcomes
from taskbench.results import AuditResult, RssRecord, Summary

Say = Callable[[str], None]
#: the built-in workloads' body: the id and the enqueue time filled in per request by the driver
BUILT_IN_BODY = '{{"value":1,"task_id":"{task_id}","enqueued_at":{enqueued_at}}}'


def prepare(cfg: RunConfig, pythons: Mapping[str, Path], say: Say) -> None:
    """``--with`` into every backend's environment and the callable checked there, before any load."""
    if not cfg.user_task or cfg.task is None:
        return
    extras = {name: backends.info(name).extra for name in pythons}
    kinds = task_env.prepare(pythons, extras, spec=cfg.task, task_path=cfg.task_path,
                             packages=cfg.with_packages, say=say)
    say(f"your task {cfg.workload} ({', '.join(sorted(set(kinds.values())))}) imports in every environment")


def request_body(cfg: RunConfig) -> str:
    """The driver's body template of the case: a user's task's carries its payload."""
    if not cfg.user_task:
        return BUILT_IN_BODY
    return payload.body_template(cfg.payload_template(), value=1, task_id=payload.PLACEHOLDER,
                                 enqueued_at=payload.RawField("{enqueued_at}"))


def rss_sampler(cfg: RunConfig, procs: ProcessSet, has_worker: bool) -> RssSampler | None:
    """The memory of what runs the tasks (the workers, or the API of ``background``), for a user's task."""
    if not cfg.user_task:
        return None

    def pids() -> dict[str, int]:
        return {p.name: p.pid for p in procs.procs
                if (p.name.startswith("worker") if has_worker else p.name == "api") and p.popen is not None}

    return RssSampler(pids).start()


def read_outcomes(cfg: RunConfig, client: Any, ledger: Ledger, say: Say, timeout: float = 30.0) -> Outcomes | None:
    """The failed executions and CPU times of a user's task (None for the built-in workloads)."""
    if not cfg.user_task:
        return None
    patient = Patient(server_of(client), say, purpose="the audit's read of the failed executions")
    return read_patiently(lambda: ledger.outcomes(client), patient, timeout) or Outcomes()


def failed_executions(outcomes: Outcomes | None) -> int:
    """Executions recorded as failed (warm-up included): the workers count them failed, not succeeded."""
    return 0 if outcomes is None else sum(count for count, _ in outcomes.failed.values())


def add_to_summary(summary: Summary, audit: AuditResult | None, rss: RssRecord | None) -> None:
    """The row's figures of a user's task: failed tasks and their types, CPU per execution, memory."""
    if audit is not None:
        summary.failed = audit.failed
        summary.failed_types = dict(audit.failed_types)
        summary.indeterminate = audit.indeterminate
        if audit.cpu_ms is not None:
            summary.cpu_p50_ms, summary.cpu_p95_ms = audit.cpu_ms.p50, audit.cpu_ms.p95
    if rss is not None:
        summary.rss_start_mb, summary.rss_peak_mb, summary.rss_end_mb = rss.start_mb, rss.peak_mb, rss.end_mb
