"""What a fault cost: recovery times, throughput ratio, timeline, and the promise that decides the status."""

from __future__ import annotations

import pytest

from taskbench.harness.faults.recovery import broken_promises, promise_of, summarize
from taskbench.results import FaultRecord, Load
from taskbench.results.model import Second


def _steady(start: float, end: float, per_s: int) -> list[float]:
    n = round((end - start) * per_s)
    return [start + i / per_s for i in range(n)]


def _times(finishes: list[float]) -> dict[str, tuple[float, ...]]:
    return {f"t{i}": (t - 0.01, t - 0.005, t) for i, t in enumerate(finishes)}


def test_summary_of_a_pause_at_10_s_lasting_3_s() -> None:
    # 100/s before the fault, nothing during it, 200/s (the backlog) for 2 s, then 100/s again
    finishes = _steady(1000.0, 1010.0, 100) + _steady(1013.0, 1015.0, 200) + _steady(1015.0, 1020.0, 100)
    load = Load(per_second=[Second(t=t, ok=100) for t in range(20)])  # the first request at 1000.0
    record = FaultRecord(fault="pause-worker@10+3", target="worker-0", injected=True, at=1010.0, ended=1013.0,
                         load_start=1000.0)
    out = summarize(record, _times(finishes), load, promise_of("arq", "redis", durable=True))
    assert out.first_execution_s == pytest.approx(3.0, abs=0.01)
    assert out.executing_again_s == pytest.approx(3.0, abs=0.02)
    assert out.executing_90_s == pytest.approx(3.0, abs=0.02)
    assert out.pre_fault_rate == pytest.approx(100.0)
    # the window after recovery, as long as the pre-fault one (3 s): 2 s at 200/s and 1 s at 100/s
    assert out.throughput_ratio == pytest.approx(500 / 3 / 100, abs=0.02)
    assert out.recovered is True
    assert [s.executed for s in out.timeline[9:14]] == [100, 0, 0, 0, 200]
    assert [s.accepted for s in out.timeline[:3]] == [100, 100, 100] and len(out.timeline) == 20
    assert broken_promises(out, lost=0, duplicated=3) == []  # at-least-once: duplicates are reported only


def test_a_fault_that_never_recovers_or_loses_a_kept_task_fails() -> None:
    finishes = _steady(1000.0, 1010.0, 100) + _steady(1011.0, 1020.0, 10)  # a trickle after the fault
    record = FaultRecord(fault="stall-broker@10+1", target="broker", injected=True, at=1010.0, load_start=1000.0)
    out = summarize(record, _times(finishes), None, promise_of("celery", "redis", durable=True))
    assert out.recovered is False and out.executing_again_s is None and out.throughput_ratio is None
    reasons = broken_promises(out, lost=2, duplicated=1)
    assert len(reasons) == 2 and "2 accepted task(s) lost" in reasons[0] and "never recovered" in reasons[1]


def test_background_tasks_promise_nothing_after_the_202() -> None:
    promise = promise_of("background", "redis", durable=False)
    assert not promise.keeps_accepted and not promise.no_duplicates
    record = FaultRecord(fault="kill-api@2", injected=True, at=2.0, promise=promise, recovered=True)
    assert broken_promises(record, lost=80, duplicated=0) == []
    not_injected = FaultRecord(fault="kill-api@2", promise=promise_of("arq", "redis", durable=True))
    assert broken_promises(not_injected, lost=5, duplicated=0) == []  # no fault: the plain audit rule holds


def test_the_pre_fault_rate_starts_with_the_load() -> None:
    # a warm-up burst at 990 s and a pause before the load (1000 s): not part of the rate before the fault
    warm = _steady(990.0, 990.5, 100)
    finishes = warm + _steady(1000.0, 1002.0, 100) + _steady(1003.0, 1010.0, 100)
    record = FaultRecord(fault="kill-worker@2", target="worker-0", injected=True, at=1002.0, load_start=1000.0)
    out = summarize(record, _times(finishes), None, promise_of("arq", "redis", durable=True))
    assert out.pre_fault_rate == pytest.approx(100.0)
    assert out.throughput_ratio == pytest.approx(1.0, abs=0.02)
    assert out.executing_again_s == pytest.approx(1.0, abs=0.02)


def test_the_driver_rows_move_by_its_start_up_and_the_warm_up_is_left_out() -> None:
    # the load phase began at 1000.0, the driver's first request left at 1001.2: its second 0 is ours 1
    times = _times(_steady(1001.2, 1005.2, 50))
    times["w1"] = (990.0, 990.1, 990.2)  # a warm-up task
    load = Load(per_second=[Second(t=t, ok=50) for t in range(4)])
    record = FaultRecord(fault="kill-worker@3", target="worker-0", injected=True, at=1003.0, load_start=1000.0)
    out = summarize(record, times, load, promise_of("arq", "redis", durable=True), ignore_prefix="w")
    assert out.first_send == pytest.approx(1001.2 - 0.01)
    assert [s.accepted for s in out.timeline[:5]] == [0, 50, 50, 50, 50]
    assert out.pre_fault_rate == pytest.approx(50.0, abs=1.5)  # over 1.8 s from the first request


def test_no_verdict_when_no_task_came_in_after_the_fault() -> None:
    # the API was killed and came back after the load ended: nothing to execute, nothing to judge
    finishes = _steady(1000.0, 1010.0, 100)
    record = FaultRecord(fault="kill-api@10", target="api", injected=True, at=1010.0, load_start=1000.0)
    out = summarize(record, _times(finishes), None, promise_of("taskiq", "redis", durable=True))
    assert out.executing_again_s is None and out.recovered is None
    assert broken_promises(out, lost=0, duplicated=0) == []


def test_a_fault_during_the_drain_is_judged_on_the_backlog() -> None:
    # the load sent everything in its first 2 s; the broker restarts at 3 s with a backlog queued
    enqueued = _steady(1000.0, 1002.0, 500)
    backlog_runs = [1000.0 + i / 200 for i in range(len(enqueued))]  # the worker drains at 200/s
    stopped = {f"t{i}": (e, f - 0.005, f) for i, (e, f) in enumerate(zip(enqueued, backlog_runs, strict=True))
               if f < 1003.0}
    promise = promise_of("arq", "redis", durable=True)
    record = FaultRecord(fault="restart-broker@3", target="broker", injected=True, at=1003.0,
                         load_start=1000.0, during_drain=True)
    # nothing ran after the fault: never recovered, which fails the case
    never = summarize(record, stopped, None, promise)
    assert never.recovered is False and never.executing_again_s is None
    assert any("never recovered" in line for line in broken_promises(never, lost=0, duplicated=0))
    # the backlog ran on after it: recovered, with the time it took
    resumed = {f"t{i}": (e, f - 0.005, f + (0.5 if f >= 1003.0 else 0.0))
               for i, (e, f) in enumerate(zip(enqueued, backlog_runs, strict=True))}
    back = summarize(record, resumed, None, promise)
    assert back.recovered is True and back.executing_again_s == pytest.approx(0.5, abs=0.05)
    assert broken_promises(back, lost=0, duplicated=0) == []
