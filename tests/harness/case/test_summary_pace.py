"""A queue case's row says whether the workers kept up: accepted/s, the backlog left, the drain's length."""

from __future__ import annotations

import pytest

from taskbench.harness.case.audit import queue_summary
from taskbench.results import AuditResult, Load


def _figures(*, drained: bool = True) -> tuple[Load, AuditResult]:
    load = Load(requests=2000, completed=2000, ok=2000, elapsed_s=4.0, rps=500.0)
    audit = AuditResult(accepted=2000, executed=2000, lost=0, duplicated=0, first_start=100.2,
                        last_finish=110.9 if drained else None)
    return load, audit


def test_the_row_holds_the_api_s_rate_the_backlog_left_and_the_drain() -> None:
    load, audit = _figures()
    summary = queue_summary(load, audit, load_start=99.9, drained=True, fault=None, load_end=104.0,
                            finished_by_end=604)
    assert summary.accepted_per_s == 500.0
    assert summary.backlog_end == 1396
    assert summary.drain_s == pytest.approx(6.9)
    assert summary.executed_per_s == pytest.approx(2000 / 10.7)


def test_a_drain_that_did_not_end_has_no_length() -> None:
    load, audit = _figures(drained=False)
    summary = queue_summary(load, audit, load_start=99.9, drained=False, fault=None, load_end=104.0,
                            finished_by_end=604)
    assert summary.drain_s is None and summary.backlog_end == 1396


def test_without_the_load_s_end_the_row_leaves_the_backlog_out() -> None:
    load, audit = _figures()
    summary = queue_summary(load, audit, load_start=99.9, drained=True, fault=None)
    assert summary.backlog_end is None and summary.drain_s is None and summary.accepted_per_s == 500.0
