"""The search for the highest sustainable rate against a synthetic queue: its workers run ``capacity``
tasks a second, its API takes ``api`` requests a second. The search must bracket the capacity within
its precision, judge each step by the objective, and say how far to trust the figure."""

from __future__ import annotations

import itertools
from collections.abc import Callable

import pytest

from taskbench.harness.load.search import Objective, Search, judge, run_synthetic
from taskbench.results.load import RateStep

DEFAULT = Objective()


def queue(capacity: float, api: float = 1e9, base_ms: float = 20.0,
          objective: Objective = DEFAULT) -> Callable[[float], RateStep]:
    """A rate -> the step a queue of this capacity would show: above it the backlog grows by the excess."""
    def step(rate: float) -> RateStep:
        accepted = min(rate, api)
        grows = max(0.0, accepted - capacity)
        figures = RateStep(rate=rate, duration_s=objective.step_s, settle_s=objective.settle_s, accepted_rps=accepted,
                           executed_per_s=min(accepted, capacity), backlog_slope=grows, slope_stderr=0.5,
                           e2e_p95_ms=base_ms + grows)
        reasons = judge(figures, objective)
        return figures.model_copy(update={"passed": not reasons, "reasons": reasons})
    return step


@pytest.mark.parametrize("capacity", [37.0, 180.0, 430.0, 1000.0, 2600.0])
def test_the_rate_is_bracketed_within_the_precision(capacity: float) -> None:
    objective = Objective()
    found = run_synthetic(Search(objective), queue(capacity))
    assert found.rate is not None and found.upper is not None
    # the growth bound lets a rate pass up to capacity / (1 - 5 %): the true limit of this objective
    limit = capacity / (1 - objective.max_growth_pct / 100)
    assert found.rate <= limit < found.upper <= found.rate * (1 + objective.precision)
    assert found.confidence in ("high", "marginal")
    assert len(found.steps) <= objective.max_steps
    assert found.steps[0].rate == objective.start_rate
    assert all(s.passed == (s.rate <= limit) for s in found.steps)
    # a coarse ramp by the factor until the first miss, then each step inside the bracket known before it
    first_miss = next(i for i, s in enumerate(found.steps) if not s.passed)
    ramp = [s.rate for s in found.steps[:first_miss + 1]]
    assert all(b / a == objective.factor for a, b in itertools.pairwise(ramp))
    for i, step in enumerate(found.steps[first_miss + 1:], start=first_miss + 1):
        before = found.steps[:i]
        low = max((s.rate for s in before if s.passed), default=0.0)
        high = min(s.rate for s in before if not s.passed)
        assert low < step.rate < high

def test_a_slow_api_misses_by_what_it_accepted() -> None:
    found = run_synthetic(Search(Objective()), queue(capacity=5000, api=300))
    assert found.rate is not None and found.rate <= 300 / 0.95 < (found.upper or 0)
    missed = next(s for s in found.steps if not s.passed)
    assert any("the API accepted" in r for r in missed.reasons)


def test_the_latency_bound_alone_can_decide() -> None:
    objective = Objective(max_e2e_p95_ms=10.0)
    found = run_synthetic(Search(objective), queue(capacity=1000, base_ms=20.0, objective=objective))
    assert found.rate is None and found.confidence == "none"
    assert all(any("e2e p95" in r for r in s.reasons) for s in found.steps)
    assert found.steps[-1].rate / objective.factor < objective.min_rate  # it ramped down to the floor


def test_a_queue_faster_than_the_top_is_a_lower_bound() -> None:
    objective = Objective(max_rate=1000)
    found = run_synthetic(Search(objective), queue(capacity=50_000, objective=objective))
    assert found.rate == 1000 and found.upper is None and found.confidence == "lower bound"
    assert [s.rate for s in found.steps] == [100, 200, 400, 800, 1000]


def test_the_steps_run_out_first() -> None:
    objective = Objective(max_steps=4)
    found = run_synthetic(Search(objective), queue(capacity=300, objective=objective))
    assert [s.rate for s in found.steps][:3] == [100, 200, 400] and len(found.steps) == 4
    assert found.confidence == "low" and "when the steps ran out" in found.note


def test_a_noisy_pass_above_a_miss_keeps_the_lower_figure() -> None:
    search = Search(Objective())
    step = queue(capacity=400)
    for rate in (100, 200, 400):
        search.record(step(rate))
    noisy = step(800).model_copy(update={"passed": True, "reasons": []})  # the machine's noise
    search.record(step(500))
    search.record(noisy)
    assert search.bracket() == (400, 500)
    assert "met it above the miss" in search.outcome().note


def test_a_stopped_search_says_why() -> None:
    search = Search(Objective())
    search.record(queue(capacity=400)(100))
    search.stop("the backlog of the step at 100 req/s did not drain in 90 s")
    assert search.next_rate() is None
    assert "did not drain" in search.outcome().note


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"max_e2e_p95_ms": 0}, "--max-e2e-p95"), ({"max_growth_pct": 0}, "--max-backlog-growth"),
    ({"step_s": 2}, "--step-duration"), ({"start_rate": 1e7}, "--start-rate"),
    ({"step_s": 4, "settle_s": 3}, "at least 2 s"),
])
def test_an_objective_out_of_range_is_one_line(kwargs: dict[str, float], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        Objective(**kwargs)  # type: ignore[arg-type]
