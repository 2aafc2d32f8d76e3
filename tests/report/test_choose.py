"""``taskbench choose``'s rankings and sentences, made from the figures of a record alone."""

from __future__ import annotations

from taskbench.report.choose import kept_ranking, rank, render
from taskbench.results.choose import BackendChoice, Cell, ChooseResult, FaultCell


def backend(name: str, rate: float | None, bracket: tuple[float, float] | None, e2e: float, drain: float,
            memory: float, faults: list[FaultCell]) -> BackendChoice:
    low, high = bracket or (None, None)
    return BackendChoice(
        backend=name, promise=f"{name}'s promise",
        rate=Cell(value=rate, low=low, high=high, unit="req/s", note="" if rate else "no step met the objective"),
        e2e_p95=Cell(value=e2e, low=e2e * 0.9, high=e2e * 1.1, unit="ms"),
        drain=Cell(value=drain, low=drain, high=drain, unit="tasks/s"),
        memory=Cell(value=memory, low=memory - 1, high=memory + 1, unit="MB/h"), faults=faults)


def kept(fault: str) -> FaultCell:
    return FaultCell(fault=fault, injected=True, kept=True, lost=0, duplicated=0)


def record() -> ChooseResult:
    return ChooseResult(run_id="choose-test", backends=[
        backend("arq", 200, (200, 230), 480.0, 900, 0.5, [kept("kill-worker@2"), kept("restart-broker@2")]),
        backend("saq", 220, (220, 250), 12.0, 1500, 2.0, [
            FaultCell(fault="kill-worker@2", injected=True, kept=True, lost=3, duplicated=0),
            kept("restart-broker@2")]),
        backend("celery", 400, (400, 440), 30.0, 700, -0.5, [
            FaultCell(fault="kill-worker@2", injected=True, kept=False, lost=5, duplicated=0,
                      broken=["5 accepted task(s) lost, beyond the bound"]),
            FaultCell(fault="restart-broker@2", note="the broker could not be restarted")]),
        backend("rq", None, None, 50.0, 300, 1.0, []),
    ])


def test_each_ranking_orders_by_its_figure_and_says_only_what_the_figures_say() -> None:
    rankings = {r.criterion: r for r in rank(record())}
    rate = rankings["highest sustainable rate"]
    assert rate.order == ["celery", "saq", "arq"]
    assert rate.statement.startswith("highest sustainable rate: celery, 400 req/s (400..440); then saq 220 req/s")
    assert "No figure: rq (no step met the objective)" in rate.statement
    assert "overlaps" not in rate.statement  # celery's bracket is clear of saq's
    assert rankings["lowest e2e p95 at half the sustainable rate"].order == ["saq", "celery", "rq", "arq"]
    assert rankings["fastest drain"].order == ["saq", "arq", "celery", "rq"]
    assert rankings["least memory growth"].order == ["celery", "arq", "rq", "saq"]


def test_overlapping_spreads_are_said_not_to_settle_the_order() -> None:
    result = record()
    result.backends[0].rate = Cell(value=390, low=390, high=430, unit="req/s")  # arq's bracket overlaps celery's
    statement = rank(result)[0].statement
    assert statement.startswith("highest sustainable rate: celery")
    assert "celery's spread overlaps arq's: this run does not settle which of the two is better" in statement


def test_kept_every_task_names_who_lost_tasks_inside_or_beyond_its_promise_and_who_was_not_judged() -> None:
    ranking = kept_ranking(record())
    assert ranking.order == ["arq"]
    assert ranking.statement.startswith("kept every task under faults (kill-worker and restart-broker): arq")
    assert "saq (3 under kill-worker, within its promise)" in ranking.statement
    assert "Not judged: celery (restart-broker: the broker could not be restarted), rq (no fault case)" \
        in ranking.statement
    assert record().broken() == ["celery: 5 accepted task(s) lost, beyond the bound"]


def test_the_page_has_the_matrix_the_promises_and_every_ranking() -> None:
    result = record()
    page = render(result)
    for ranking in rank(result):
        assert ranking.statement.replace("'", "&#x27;") in page
    assert "arq&#x27;s promise" in page and "BROKE its promise" in page and "promise broken: celery" in page
    assert page.count("<tr>") == 1 + len(result.backends)
