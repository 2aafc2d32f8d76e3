"""``taskbench choose`` on one real backend with tiny budgets: every criterion measured, the page written."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from taskbench.harness.commands.choose import Budget, Chooser, durable_backends
from taskbench.report.choose import rank, render
from taskbench.results.choose import ChooseResult
from tests.helpers import assert_one_line_error

TINY = Budget(step_s=3.0, settle_s=1.0, max_steps=3, start_rate=20.0, soak_s=10.0, drain_tasks=200, drain_rounds=1)


def test_the_durable_backends_leave_out_background_and_the_unsafe_wiring() -> None:
    names = durable_backends()
    assert "arq" in names and "procrastinate" in names
    assert "background" not in names and "faststream-pubsub" not in names


def test_an_unknown_backend_is_one_line(cli: object, out_dir: Path) -> None:
    out = cli("choose", "--backends", "nope", "--output", str(out_dir))  # type: ignore[operator]
    assert_one_line_error(out, "nope")


def test_the_fault_cases_wait_for_a_redelivery_as_long_as_the_fault_matrix_does(out_dir: Path) -> None:
    """Every durable backend's promise under choose's fault settings brings a dead worker's tasks back within
    three minutes, as in the fault matrix (rq-retry's 156 s the longest): with RQ's own maintenance interval,
    rq-retry's gave them 2,100 s and one fault case of `choose --quick` waited for them."""
    from taskbench import backends as registry

    chooser = Chooser(durable_backends(), TINY, out_dir, quick=True, say=lambda _: None)
    for fault in ("kill-worker@2", "restart-broker@2"):
        cfg = chooser._fault_config(fault, {})
        for name in cfg.backends:
            delivery = registry.info(name).delivery_on(cfg.broker_for(name), cfg.promise_settings(name))
            assert delivery.after is None or delivery.after <= 180, (fault, name, delivery.after)


@pytest.mark.timeout(600)
def test_choose_measures_every_criterion_of_one_backend(out_dir: Path) -> None:
    chooser = Chooser(["arq"], TINY, out_dir, quick=True, say=lambda _: None)
    result = chooser.run()
    (choice,) = result.backends
    assert choice.backend == "arq" and choice.promise.startswith("at-least-once")
    assert choice.rate.value is not None and choice.rate.value > 0, choice.rate
    assert choice.e2e_p95.value is not None and choice.e2e_p95.value > 0, choice.e2e_p95
    assert choice.memory.value is not None, choice.memory
    assert choice.drain.value is not None and choice.drain.value > 0, choice.drain
    assert [f.fault for f in choice.faults] == ["kill-worker@2", "restart-broker@2"]
    for fault in choice.faults:  # arq keeps its promise under both (docs/faults.md)
        assert fault.injected and fault.kept, fault
    assert not result.broken()
    for path in result.results:
        assert Path(path).exists(), path
    result.rankings = rank(result)
    again = ChooseResult.model_validate(json.loads(result.model_dump_json()))
    assert again == result
    assert "highest sustainable rate: arq" in render(result)
