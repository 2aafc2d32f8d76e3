"""The bounds of a promise (issue 34): a figure inside them passes with the bound named, beyond them it
fails naming the bound it broke; every case of the fault matrix is judged by bounds with a source."""

from __future__ import annotations

from pathlib import Path

import pytest

from taskbench import backends
from taskbench.backends import bounds
from taskbench.harness.case.audit import queue_status
from taskbench.harness.faults.recovery import fault_verdict, promise_of
from taskbench.harness.faults.verdict import judge
from taskbench.results import FaultRecord, Summary
from taskbench.scenarios import parse

FAULTS = Path(__file__).parents[3] / "src" / "taskbench" / "scenarios" / "files" / "faults.toml"


def test_a_pinned_sets_versions_promise_nothing_whatever_the_registry_says() -> None:
    lock = promise_of("arq", "redis", durable=True, fault="restart-broker")
    pinned = promise_of("arq", "redis", durable=True, fault="restart-broker", versions="article-000")
    assert lock.keeps_accepted and not pinned.keeps_accepted and not pinned.no_duplicates
    assert "on article-000's versions, whose promise taskbench does not state" in pinned.text


def test_a_loss_inside_celerys_brpop_window_passes_and_names_the_window() -> None:
    promise = promise_of("celery", "redis", durable=True, fault="kill-worker")
    verdict = judge(promise, lost=1, duplicated=2, kills=1)
    assert verdict.broken == []
    lost, dup = verdict.within
    assert lost.startswith("1 accepted task(s) lost: within the bound") and "BRPOP" in lost
    assert "kombu/transport/redis.py" in lost  # the bound's source is in the line
    assert dup.startswith("2 task(s) ran twice: within") and "duplicates allowed" in dup


def test_a_per_kill_bound_grows_with_the_kills_and_a_loss_beyond_it_names_the_bound() -> None:
    promise = promise_of("celery", "redis", durable=True, fault="kill-worker")
    assert judge(promise, lost=3, duplicated=0, kills=3).broken == []
    (line,) = judge(promise, lost=3, duplicated=0, kills=2).broken
    assert "3 accepted task(s) lost, beyond the bound of celery on redis (at-least-once) (at most 2)" in line
    assert "1 per kill, 2 kill(s)" in line and "QoS.append" in line and "source: kombu" in line


def test_a_bound_covers_only_its_faults() -> None:
    """Celery's BRPOP window is a kill's or a restart's: a stalled broker closes no connection."""
    stalled = promise_of("celery", "redis", durable=True, fault="stall-broker")
    (line,) = judge(stalled, lost=1, duplicated=0).broken
    assert "promises to keep (no bound allows any)" in line
    restarted = promise_of("celery", "redis", durable=True, fault="restart-broker", workers=2)
    assert judge(restarted, lost=2, duplicated=0).broken == []  # one BRPOP in flight per worker
    assert judge(restarted, lost=3, duplicated=0).broken


def test_a_bound_per_worker_slot_is_multiplied_by_the_case() -> None:
    """Dramatiq forgets up to its prefetch (2 x worker threads) on a connection error."""
    promise = promise_of("dramatiq", "redis", durable=True, fault="restart-broker", workers=1, concurrency=10)
    (bound,) = [b for b in promise.bounds if b.figure == bounds.LOST]
    assert bound.tasks == 20 and not bound.per_kill
    assert judge(promise, lost=20, duplicated=0).broken == []
    (line,) = judge(promise, lost=21, duplicated=0).broken
    assert "(at most 20)" in line and "ConsumerThread.run" in line


def test_without_a_bound_a_loss_fails_as_before_and_at_most_once_fails_on_a_duplicate() -> None:
    arq = promise_of("arq", "redis", durable=True, fault="kill-worker")
    assert judge(arq, lost=1, duplicated=5).broken == ["1 accepted task(s) lost, which arq on redis (at-least-once) "
                                                       "promises to keep (no bound allows any)"]
    huey = promise_of("huey", "redis", durable=True, fault="kill-worker")
    verdict = judge(huey, lost=7, duplicated=1)
    assert verdict.within[0].startswith("7 accepted task(s) lost: within") and "losses allowed" in verdict.within[0]
    assert verdict.broken == ["1 task(s) ran twice, which huey on redis (at-most-once) promises not to do "
                              "(no bound allows any)"]


def test_no_recovery_is_allowed_only_where_the_library_cannot_recover() -> None:
    """FastStream's consumer group and streaq's Lua library go with a broker that lost its data; with the
    data kept, never recovering fails the case."""
    record = FaultRecord(fault="restart-broker@2", target="broker", injected=True, at=1.0, recovered=False,
                         pre_fault_rate=300.0)
    for name in ("faststream", "streaq"):
        emptied = promise_of(name, "redis", durable=False, why="no persistence", broker_keeps=False,
                             fault="restart-broker")
        verdict = fault_verdict(record.model_copy(update={"promise": emptied}), lost=500, duplicated=0)
        assert verdict.broken == [], name
        assert any(line.startswith("no recovery: within") for line in verdict.within), name
        kept = promise_of(name, "redis", durable=True, fault="restart-broker")
        (line,) = fault_verdict(record.model_copy(update={"promise": kept}), lost=0, duplicated=0).broken
        assert "never recovered" in line
    arq = promise_of("arq", "redis", durable=False, why="no persistence", broker_keeps=False, fault="restart-broker")
    assert fault_verdict(record.model_copy(update={"promise": arq}), lost=0, duplicated=0).broken


def test_a_fault_case_inside_its_bounds_is_ok_and_an_unsafe_wiring_stays_errors() -> None:
    summary = Summary(accepted=1500, lost=1, duplicated=2, errors_pct=0.0)
    assert queue_status(summary, audit_ok=True, drained=True, failures=[], bounded=True) == "ok"
    assert queue_status(summary, audit_ok=True, drained=True, failures=[]) == "errors"
    failed = Summary(accepted=1500, errors_pct=4.0)
    assert queue_status(failed, audit_ok=True, drained=True, failures=[], bounded=True) == "errors"


def _matrix_cases() -> list[dict]:
    return [case.params for case in parse.load(FAULTS).cases]


def test_every_case_of_the_fault_matrix_is_judged_by_bounds_with_a_source() -> None:
    seen = set()
    for params in _matrix_cases():
        name = params["backend"]
        meta = backends.info(name)
        broker = params.get("broker") or meta.brokers[0]
        fault = params.get("fault")
        kind = fault.split("@")[0] if fault else None
        settings = {k: params[k] for k in meta.promise_settings if k in params}
        promise = promise_of(name, broker, durable=True, fault=kind, settings=settings,
                             workers=params.get("workers", 1), concurrency=params.get("concurrency", 10))
        assert promise.bounds, f"{name} on {broker} under {fault}: no bound at all"
        for bound in promise.bounds:
            assert bound.source.strip() and bound.text.strip(), (name, broker, fault, bound)
        # the guarantee is a bound too: at-least-once allows duplicates, at-most-once losses
        figure = bounds.LOST if promise.no_duplicates else bounds.DUPLICATED
        assert any(b.figure == figure and b.tasks is None for b in promise.bounds), (name, broker, fault)
        seen.add((name, broker))
    assert ("celery", "rabbitmq") in seen and ("pgqueuer", "postgres") in seen and ("huey", "redis") in seen
    for meta in backends.REGISTRY.values():  # and every window the registry states has one
        for broker in meta.brokers:
            for bound in meta.delivery_on(broker).all_bounds():
                assert bound.source.strip(), (meta.name, broker, bound)


def test_a_bound_without_a_source_is_refused() -> None:
    with pytest.raises(ValueError, match="source"):
        bounds.Bound(figure=bounds.LOST, text="something", source=" ")


def test_a_figure_inside_its_bounds_is_shown_with_the_bound_in_the_reports() -> None:
    import io

    from rich.console import Console

    from taskbench.report import html, scenario
    from taskbench.results import QueueCase, Result, ScenarioInfo

    line = "1 accepted task(s) lost: within the bound of celery on redis (at-least-once): up to 1: BRPOP [source: kombu]"
    case = QueueCase(index=3, label="celery, kill-worker@2", backend="celery", status="ok",
                     fault=FaultRecord(fault="kill-worker@2", injected=True, within_bounds=[line]),
                     summary=Summary(accepted=1500, lost=1, fault="kill-worker@2"))
    result = Result(kind="scenario", run_id="faults-x", created="2026-11-26T12:00:00+00:00", cases=[case],
                    scenario=ScenarioInfo(name="faults", description="d", kind="queue", file="faults.toml"))
    out = io.StringIO()
    scenario.render(result, Console(file=out, width=300, force_terminal=False))
    assert f"celery, kill-worker@2: {line}" in out.getvalue().replace("\n", " ")
    assert "within the bound of celery on redis" in html.render(result)


def test_taskbench_backends_lists_every_bound_with_its_source() -> None:
    from typer.testing import CliRunner

    from taskbench.cli import app

    out = CliRunner().invoke(app, ["backends"]).output
    assert ("bound: lost (up to 1 per kill, under kill-worker): the task fetched at the kill instant" in out
            and "[source: kombu 5.7 kombu/transport/redis.py Channel._brpop_read -> QoS.append" in out)
    bounds_shown = sum(len(m.delivery_on(b).all_bounds()) for m in backends.REGISTRY.values() for b in m.brokers)
    assert out.count("bound: ") == bounds_shown and out.count("[source: ") == bounds_shown
