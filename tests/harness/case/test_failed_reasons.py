"""A failed status always names its reason: nothing accepted, an audit that did not pass, a drain that did
not end, an interrupt; and an interrupted case's row holds what was measured."""

from __future__ import annotations

import itertools

import pytest

from taskbench.driver import LoadResult
from taskbench.harness.case.audit import mark_interrupted, queue_status
from taskbench.histogram import Histogram
from taskbench.results import QueueCase, Summary


@pytest.mark.parametrize(("summary", "audit_ok", "drained", "given", "status", "reasons"), [
    (Summary(requests=100, accepted=0), True, True, [], "failed", ["none of the 100 requests was accepted"]),
    (Summary(requests=0, accepted=0), True, True, [], "failed", ["the load sent no request"]),
    (Summary(), True, True, [], "failed", ["the load sent no request"]),  # no load ran at all
    (Summary(requests=10, accepted=10), False, True, [], "failed", ["the ledger's audit did not pass"]),
    (Summary(requests=10, accepted=10), True, False, [], "failed", ["the drain did not end"]),
    (Summary(requests=10, accepted=10), False, False, [], "failed",
     ["the ledger's audit did not pass", "the drain did not end"]),
    # a step that said why is the reason: nothing generic is added to it
    (Summary(requests=10, accepted=10), True, False, ["the drain stalled"], "failed", ["the drain stalled"]),
    (Summary(requests=10, accepted=0), True, True, ["worker-0 died"], "failed",
     ["worker-0 died", "none of the 10 requests was accepted"]),
    (Summary(requests=10, accepted=10), True, True, [], "ok", []),
    (Summary(requests=10, accepted=9, errors_pct=10.0), True, True, [], "errors", []),
])
def test_the_status_and_its_reasons(summary: Summary, audit_ok: bool, drained: bool, given: list[str],
                                    status: str, reasons: list[str]) -> None:
    failures = list(given)
    assert queue_status(summary, audit_ok=audit_ok, drained=drained, failures=failures) == status
    assert failures == reasons


@pytest.mark.parametrize(("accepted", "audit_ok", "drained", "bounded", "lost"),
                         list(itertools.product([None, 0, 5], [True, False], [True, False], [True, False], [0, 3])))
def test_no_failed_status_without_a_reason(accepted: int | None, audit_ok: bool, drained: bool, bounded: bool,
                                           lost: int) -> None:
    failures: list[str] = []
    summary = Summary(requests=5, accepted=accepted, lost=lost)
    status = queue_status(summary, audit_ok=audit_ok, drained=drained, failures=failures, bounded=bounded)
    assert (status == "failed") == bool(failures)


def _load(ok: int, failed: int) -> LoadResult:
    latency = Histogram()
    for micros in range(1000, 1000 + ok + failed):
        latency.record(micros)
    return LoadResult(model="closed", requests=ok + failed, completed=ok + failed, ok=ok,
                      errors={"http_500": failed} if failed else {}, latency=latency, first_send=1.0,
                      last_response=3.0)


@pytest.mark.parametrize(("ok", "failed"), [(40, 0), (30, 10), (0, 5)])
def test_an_interrupted_case_has_its_reason_and_the_loads_figures(ok: int, failed: int) -> None:
    case = QueueCase(backend="arq", status="ok", load=_load(ok, failed).finalize().to_model())
    mark_interrupted(case, "interrupted during [arq] drain")
    assert case.status == "failed" and case.failures == ["interrupted during [arq] drain"]
    assert case.summary.requests == ok + failed and case.summary.accepted == ok
    assert case.summary.accepted_per_s == pytest.approx(ok / 2.0)
    assert case.summary.p95_ms is not None
    assert case.summary.errors_pct == pytest.approx(100.0 * failed / (ok + failed))


def test_an_interrupt_before_the_load_keeps_an_empty_row() -> None:
    case = QueueCase(backend="arq")
    mark_interrupted(case, "interrupted during [arq] start")
    assert case.status == "failed" and case.failures == ["interrupted during [arq] start"]
    assert case.summary == Summary()


def test_an_audited_case_keeps_its_row_when_interrupted_after() -> None:
    case = QueueCase(backend="arq", load=_load(10, 0).finalize().to_model(),
                     summary=Summary(requests=10, accepted=9, executed=9))
    mark_interrupted(case, "interrupted during [arq] stop")
    assert case.summary.accepted == 9 and case.summary.executed == 9
