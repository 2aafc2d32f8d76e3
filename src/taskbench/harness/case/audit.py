"""The audit step of a case, and its verdict: the ledger's rows read (waiting for a Redis that stalls), the
processes' own counters checked against them, the case's row and its status."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from taskbench.harness.faults.stalls import Patient, read_patiently, server_of
from taskbench.harness.scrape import cross_check
from taskbench.ledger import Ledger
from taskbench.ledger.rows import Rows
from taskbench.metrics import final_key
from taskbench.results import AuditResult, FaultRecord, Load, MetricsCheck, QueueCase, Status, Summary
from taskbench.settings import Settings

Say = Callable[[str], None]
#: how long the audit's read of the ledger, and the metrics check's, wait for a Redis that does not answer
READ_TIMEOUT = 30.0


def read_ledger(client: Any, ledger: Ledger, *, say: Say,
                timeout: float = READ_TIMEOUT) -> tuple[Rows | None, list[str]]:
    """The ledger's rows for the audit, read again with backoff while Redis does not answer.

    None and a one-line failure when it did not answer within ``timeout``: the case fails, the run goes on.
    """
    patient = Patient(server_of(client), say, purpose="the audit's read of the ledger")
    rows = read_patiently(lambda: ledger.rows(client), patient, timeout)
    if rows is None:
        return None, [f"audit: could not read the ledger: {patient.server} did not answer within "
                      f"{timeout:g} s ({patient.error})"]
    return rows, []


def check_metrics(client: Any, settings: Settings, port: int, executions: int,
                  fault: FaultRecord | None, revived: list[str] | None = None,
                  stopped: list[str] | None = None) -> tuple[MetricsCheck, list[str]]:
    """The processes' own counters against the ledger: succeeded == executions. Returns the check and failures.

    ``stopped``: processes stopped before the audit (:func:`stop_executors`): a worker's counters are the
    ones it wrote as it stopped; an API's went with it, so the audit is the account.
    """
    urls = {"api": f"http://127.0.0.1:{port}/metrics"}
    patient = Patient(server_of(client), lambda _: None, purpose="the workers' metrics URLs")
    registered = read_patiently(lambda: client.hgetall(settings.metrics_key), patient, READ_TIMEOUT / 3)
    finals = read_patiently(lambda: client.hgetall(final_key(settings.prefix)), patient, READ_TIMEOUT / 3)
    if registered is None or finals is None:
        error = f"could not read the workers' metrics URLs: {patient.server} did not answer ({patient.error})"
        return MetricsCheck(ledger_executions=executions, errors=[error]), [f"metrics: {error}"]
    if stopped and "api" in stopped:
        checked = MetricsCheck(ledger_executions=executions,
                               note="the API ran the tasks and was stopped at the drain's end, its counters with "
                                    "it; the ledger's audit is the account of this run")
        return checked, []
    urls.update({_text(k): _text(v) for k, v in registered.items()})
    injected = fault is not None and fault.injected
    # a SIGKILLed worker's counters are gone: no wait makes them add up (a paused one may catch up)
    killed = injected and fault is not None and fault.fault.startswith("kill-worker")
    settle = 0.0 if killed else 0.5 if injected else 3.0
    checked = MetricsCheck.model_validate(cross_check(urls, executions, settle=settle,
                                                      finals={_text(k): _text(v) for k, v in finals.items()}))
    if checked.match:
        return checked, []
    if injected and fault is not None:
        # a SIGKILLed process takes its /metrics with it; a paused or stalled one may be scraped
        # before it caught up: the counters cannot be the account of a fault run
        checked.note = (f"{fault.target} was hit by {fault.fault} mid-run, so its counters are incomplete; "
                        "the ledger's audit is the account of this run")
        return checked, []
    if revived:  # the exited worker's counters went with it
        checked.note = (f"{len(revived)} worker exit(s) during the run, started again (--restart-workers): "
                        "the exited process's counters are gone; the ledger's audit is the account of this run")
        return checked, []
    succeeded = checked.totals.get("taskbench_tasks_succeeded_total", 0)
    return checked, [f"metrics disagree with the ledger: {succeeded:.0f} tasks succeeded by the workers' "
                     f"counters, {executions} executions in the ledger"
                     + (f" ({'; '.join(checked.errors)})" if checked.errors else "")]


def queue_summary(load: Load, audit: AuditResult | None, *, load_start: float, drained: bool,
                  fault: FaultRecord | None, load_end: float | None = None,
                  finished_by_end: int | None = None) -> Summary:
    """The row of a queue case: the seed's columns and the audit's (none when the ledger could not be read).

    ``load_end``: the load's last answer (wall clock); ``finished_by_end``: the accepted tasks finished by
    then. With them the row says whether the workers kept up: the backlog left and the drain's length."""
    lat = load.latency_ms
    requests = max(1, load.requests)
    summary = Summary(
        requests=load.requests, rps=load.rps, p50_ms=lat.p50, p95_ms=lat.p95, p99_ms=lat.p99,
        # a 409 (an id sent twice) is the API keeping its contract, not an error: counted apart
        errors_pct=100.0 * (requests - load.ok - load.refused) / requests,
        driver_cpu_pct=100.0 * load.max_utilization, driver_saturated=load.saturated,
    )
    if audit is not None:
        last = audit.last_finish
        summary.time_to_run_all_s = (last - load_start) if (last and drained) else None
        summary.accepted, summary.executed = audit.accepted, audit.executed
        summary.lost, summary.duplicated = audit.lost, audit.duplicated
        summary.extra_executions = audit.extra_executions
        summary.unexpected, summary.late = audit.categories.unexpected, audit.late
        summary.refused = audit.categories.refused
        summary.e2e_p95_ms = audit.end_to_end_ms.p95
        first = audit.first_start
        if first is not None and last is not None and last > first and audit.executed > 1:
            summary.executed_per_s = audit.executed / (last - first)
        if load.elapsed_s > 0:
            summary.accepted_per_s = audit.accepted / load.elapsed_s
        if finished_by_end is not None:
            summary.backlog_end = max(0, audit.accepted - finished_by_end)
        if load_end is not None and last is not None and drained:
            summary.drain_s = max(0.0, last - load_end)
    if fault is not None and fault.injected:
        summary.fault = fault.fault
        summary.restart_ready_s = fault.ready_after_s
        summary.accepting_again_s = fault.accepting_again_s
        summary.executing_again_s = fault.executing_again_s
        summary.executing_90_s = fault.executing_90_s
        summary.first_execution_s = fault.first_execution_s
        summary.throughput_ratio = fault.throughput_ratio
    return summary


def queue_status(summary: Summary, *, audit_ok: bool, drained: bool, failures: list[str],
                 bounded: bool = False) -> Status:
    """ok: clean; errors: some requests failed or were refused as known ids (409), or tasks were lost
    or ran twice where the backend does not promise otherwise (an unsafe seed wiring whose duplicates
    are its measured figure); failed: otherwise. ``bounded``: a fault case, whose lost and duplicated
    tasks were judged by its promise's bounds (beyond them: a failure), so inside them they are ``ok``.

    A failed status always names its reason: what ``failures`` does not say yet is appended to it."""
    failures += failed_reasons(summary, audit_ok=audit_ok, drained=drained, failures=failures)
    if failures:
        return "failed"
    counted = 0 if bounded else summary.lost or summary.duplicated
    return "errors" if summary.errors_pct or summary.refused or counted else "ok"


def failed_reasons(summary: Summary, *, audit_ok: bool, drained: bool, failures: list[str]) -> list[str]:
    """Why a case fails that ``failures`` does not say: nothing accepted (which no other step reports),
    and, where no failure was recorded, an audit that did not pass or a drain that did not end."""
    reasons = []
    if not summary.accepted:
        sent = summary.requests or 0
        reasons.append("the load sent no request" if not sent else f"none of the {sent} requests was accepted")
    if not failures:
        if not audit_ok:
            reasons.append("the ledger's audit did not pass")
        if not drained:
            reasons.append("the drain did not end")
    return reasons


def mark_interrupted(case: QueueCase, reason: str) -> None:
    """A case an interrupt cut short: failed with ``reason``, its row holding what was measured. Cut
    before its audit, the row has the load's figures and its 2xx count as accepted (no ledger says more)."""
    case.status = "failed"
    case.failures = [*case.failures, reason]
    if case.load is not None and case.summary.requests is None:
        summary = queue_summary(case.load, None, load_start=0.0, drained=False, fault=None)
        summary.accepted = case.load.ok
        if case.load.elapsed_s > 0:
            summary.accepted_per_s = case.load.ok / case.load.elapsed_s
        case.summary = summary


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value
