"""``taskbench choose``'s answer, made from a record's figures and the constraints alone."""

from __future__ import annotations

import json

from taskbench.report.choose import outcomes, recommend, render
from taskbench.results.choose import Candidate, Cell, ChooseResult, Constraints, Drain, FaultCell


def kept(fault: str, lost: int = 0) -> FaultCell:
    return FaultCell(fault=fault, injected=True, kept=True, lost=lost, duplicated=0)


def candidate(name: str, guarantee: str, drains: dict[int, float], *, sustainable: float | None = None,
              bracket: tuple[float, float] | None = None, p95: float = 40.0, workers: int | None = None,
              cpu_us: float = 500.0, faults: list[FaultCell] | None = None) -> Candidate:
    finalist = sustainable is not None
    low, high = bracket or ((sustainable, sustainable * 1.2) if sustainable else (None, None))
    return Candidate(
        backend=name, guarantee=guarantee, promise=f"{name}'s recovery",
        stage="finalist" if finalist else ("scale" if len(drains) > 1 else "screen"),
        drains=[Drain(workers=w, rate=r, tasks=2000 * w, executed=2000 * w, worker_cpu_us=cpu_us, broker_cpu_us=50,
                      rss_mb=80.0 * w, source=f"screen/{name}-{w}.log") for w, r in drains.items()],
        workers=workers if workers is not None else (min(drains) if finalist else None),
        sustainable=Cell(value=sustainable, low=low, high=high, unit="req/s", source=f"search-{name}/result.json"),
        p95=Cell(value=p95 if finalist else None, unit="ms"), p95_rate=150.0 if finalist else None,
        faults=faults if faults is not None else ([kept("kill-worker@2"), kept("restart-broker@2")] if finalist else []))


def record(rate: float | None = 150.0, promise: str = "at-least-once") -> ChooseResult:
    return ChooseResult(
        run_id="choose-test", constraints=Constraints.model_validate(
            {"workload": "tasks.py:call_stub", "rate": rate, "promise": promise, "max_workers": 2}),
        candidates=[
            Candidate(backend="background", guarantee="at-most-once", promise="a task dies with the API process",
                      has_worker=False),
            candidate("dramatiq", "at-least-once", {1: 400, 2: 800}, sustainable=300, workers=1, cpu_us=700),
            candidate("arq", "at-least-once", {1: 20, 2: 60}),
            candidate("celery", "at-least-once", {1: 250, 2: 480}, sustainable=280, workers=1, cpu_us=900),
            candidate("saq", "at-most-once", {1: 900}),
        ])


def test_the_answer_names_the_backend_its_workers_and_the_figures_that_decided_it() -> None:
    lines = recommend(record())
    assert lines[0].startswith("for tasks.py:call_stub at 150/s, at-least-once, p95 ≤ 1 s: dramatiq with 1 worker ")
    assert "sustains 300/s through the API" in lines[0] and "one worker drains 400/s" in lines[0]
    assert "kept every task under a worker kill and a broker restart" in lines[0]
    # the runner-up, and whether the two are apart: same workers, overlapping brackets
    assert lines[1].startswith("runner-up: celery with 1 worker") and "not apart beyond this run's noise" in lines[1]
    others = "\n".join(lines[2:])
    # a recommendation plans on 80 % of a measured drain rate: 48/s of arq's 60/s, 24/s a worker
    assert "arq: left at the scale: 2 workers drain 60/s; 80% of it, 48/s, is below 150/s; about 7 workers would, " \
        "by its scaling curve" in others
    assert "saq: left at the promise: its promise is at-most-once" in others
    assert "background: left at the promise" in others


def test_the_fewest_workers_win_then_the_least_cpu_a_task() -> None:
    result = record(rate=450)
    result.candidates[1] = candidate("dramatiq", "at-least-once", {1: 400, 2: 800}, sustainable=600, workers=2,
                                     cpu_us=700)
    result.candidates[3] = candidate("celery", "at-least-once", {1: 250, 2: 600}, sustainable=500, workers=2,
                                     cpu_us=900)
    lines = recommend(result)
    assert lines[0].split(": ", 1)[1].startswith("dramatiq with 2 workers"), lines
    assert lines[1].startswith("runner-up: celery with 2 workers"), lines
    # one worker of celery reaches the rate: fewer workers come before less CPU
    result.candidates[3] = candidate("celery", "at-least-once", {1: 600, 2: 1100}, sustainable=500, workers=1,
                                     cpu_us=900)
    lines = recommend(result)
    assert lines[0].split(": ", 1)[1].startswith("celery with 1 worker"), lines
    assert "celery needs fewer workers" in lines[1], lines


def test_a_finalist_measured_with_fewer_workers_than_the_rate_needs_is_not_recommended() -> None:
    lines = recommend(record(rate=450))
    assert "no backend meets" in lines[0], lines
    assert "dramatiq: left at the finalist: measured through the API with 1 worker(s) only; 2 are needed" in lines


def test_an_at_most_once_backend_is_recommended_only_when_any_promise_will_do() -> None:
    result = record()
    result.candidates[4] = candidate("saq", "at-most-once", {1: 900}, sustainable=700, workers=1, cpu_us=300)
    assert not recommend(result)[0].split(": ", 1)[1].startswith("saq")
    anything = result.constraints.model_copy(update={"promise": "any"})
    assert "p95 ≤ 1 s: saq with 1 worker" in recommend(result, anything)[0]


def test_no_queue_at_all_when_any_promise_will_do_and_the_api_sustains_the_rate() -> None:
    result = record()
    result.candidates[0] = Candidate(backend="background", guarantee="at-most-once", promise="dies with the API",
                                     has_worker=False, stage="finalist", workers=1,
                                     sustainable=Cell(value=900, low=900, high=1100), p95=Cell(value=5), p95_rate=150)
    anything = result.constraints.model_copy(update={"promise": "any"})
    assert "background with no worker (the tasks run in the API process)" in recommend(result, anything)[0]
    assert recommend(result)[0].split(": ", 1)[1].startswith("dramatiq")


def test_a_rate_none_reaches_names_the_closest_and_the_workers_its_curve_needs() -> None:
    lines = recommend(record(rate=5000))
    assert lines[0].startswith("for tasks.py:call_stub at 5,000/s")
    # what it sustained end to end, through the API: the figure that is closest to the rate asked
    assert "no backend meets them with at most 2 workers here; the closest is dramatiq, 300/s (6% of 5,000/s)" \
        in lines[0]
    assert "it needs about 16 workers by its scaling curve" in lines[0]  # 5,000/s at 80 % of 400/s a worker


def test_a_broken_promise_or_a_missed_objective_leaves_at_the_finals() -> None:
    result = record()
    result.candidates[1].faults[0] = FaultCell(fault="kill-worker@2", injected=True, kept=False, lost=9,
                                               duplicated=0, broken=["9 lost beyond its bound"])
    result.candidates[3].p95 = Cell(value=2500, unit="ms")
    lines = recommend(result)
    assert "no backend meets" in lines[0]
    text = "\n".join(lines)
    assert "dramatiq: left at the finalist: broke its own promise under kill-worker" in text
    assert "celery: left at the finalist: e2e p95 2,500 ms at 150/s, above the 1,000 ms objective" in text


def test_without_a_rate_the_highest_sustainable_one_wins() -> None:
    result = record(rate=None)
    for c in result.candidates:  # without a rate, a finalist is measured with the most workers
        if c.stage == "finalist":
            c.workers = 2
    result.candidates[3].sustainable = Cell(value=450, low=450, high=500)
    lines = recommend(result)
    assert lines[0].startswith("for tasks.py:call_stub at the highest rate, at-least-once, p95 ≤ 1 s: celery with 2 workers")


def test_the_page_leads_with_the_answer_and_lists_every_candidate_with_its_stage() -> None:
    result = record()
    result.candidates[1].memory = Cell(value=3.0, low=-2.0, high=8.0, unit="MB/h")
    page = render(result)
    assert page.index("dramatiq with 1 worker") < page.index("Every candidate")
    for c in result.candidates:
        assert f">{c.backend}<" in page
    assert "not settled by this run (-2..8 MB/h)" in page  # its interval holds zero: no verdict
    assert "<svg" in page  # the rate against the workers, every backend on one pair of axes
    assert [c.backend for c, _ in outcomes(result)][:2] == ["dramatiq", "celery"]


def test_the_record_survives_its_json() -> None:
    result = record()
    again = ChooseResult.model_validate(json.loads(result.model_dump_json()))
    assert again == result and recommend(again) == recommend(result)


def test_the_kept_choose_runs_still_read_and_answer() -> None:
    """docs/choose.md cites these runs: each still reads, and gives an answer from its own figures."""
    from pathlib import Path

    kept = sorted((Path(__file__).resolve().parents[2] / "docs" / "runs").glob("choose-*.json"))
    runs = [ChooseResult.model_validate(json.loads(p.read_text())) for p in kept
            if json.loads(p.read_text()).get("kind") == "choose"]
    assert len(runs) >= 4, kept
    for run in runs:
        lines = recommend(run)
        assert lines[0].startswith(f"for {run.constraints.workload} "), lines[0]
        # a line per candidate, and one more when none meets the constraints (it names the closest)
        assert len(lines) == len(run.candidates) + ("no backend meets" in lines[0]), lines
        for c in run.candidates:
            assert any(c.backend in line for line in lines), (c.backend, lines)
