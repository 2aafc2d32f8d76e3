"""A phased load and a rate search on a real backend (arq): the figures per phase, the disruption's proof,
the search's steps, and their rendering. Behaviour only: counts the schedule fixes, never a duration."""

from __future__ import annotations

import io
from pathlib import Path

from rich.console import Console

from taskbench.harness.commands.rate_search import find_max_rate, search_run
from taskbench.harness.config import RunConfig
from taskbench.harness.load.search import Objective
from taskbench.report import html, table
from taskbench.results import QueueCase, load


def test_a_phased_load_gets_a_row_per_phase(redis_url: str, out_dir: Path, cli: object) -> None:
    out = cli("run", "--backends", "arq", "--redis-url", redis_url, "--output", str(out_dir), "--warmup", "0",  # type: ignore[operator]
              "--phases", "warmup:1s@20,steady:3s@40,pause-workers:2s,recovery:3s")
    assert out.exit_code == 0, out.stderr + out.stdout
    result = load(next(out_dir.glob("*/result.json")))
    (case,) = [c for c in result.cases if isinstance(c, QueueCase)]
    warm, steady, pause, recovery = case.phases
    assert [p.kind for p in case.phases] == ["warmup", "steady", "pause-workers", "recovery"]
    assert [p.measured for p in case.phases] == [False, True, True, True]
    # the schedule fixes each phase's arrivals; all of them answered 2xx
    assert [p.intended for p in case.phases] == [20, 120, 80, 120]
    assert [round(p.achieved_rps * p.duration_s) for p in case.phases] == [20, 120, 80, 120]
    assert [p.offered_rps for p in case.phases] == [20, 40, 40, 40]
    assert all(p.errors == 0 for p in case.phases)
    # every worker was frozen for the phase and let go
    assert any("in state stopped" in line for line in pause.proof)
    assert any("continued (SIGCONT)" in line for line in pause.proof)
    assert pause.backlog_end > steady.backlog_end  # the pause built a backlog: load went on, nothing ran
    assert recovery.reference_backlog is not None
    assert steady.e2e_ms.count > 0 and warm.e2e_ms.count > 0
    # the warm-up phase is in no figure: the audit and the row count the measured phases only
    assert case.audit is not None and (case.audit.accepted, case.audit.lost, case.audit.duplicated) == (320, 0, 0)
    assert case.summary.requests == 320 and case.status == "ok"
    assert sum(s.accepted for s in case.backlog) == 340  # the timeline draws the warm-up too
    printed = out.stderr + out.stdout
    assert "phases (the warm-up is in no figure)" in printed and "pause-workers 4-6 s" in printed
    page = html.render(result)
    assert "<h2>Phases</h2>" in page and "Phases: tasks per second and the backlog" in page
    assert "pause-workers</text>" in page  # its band's label in the plot


def test_a_search_with_a_bound_no_rate_meets(redis_url: str, out_dir: Path) -> None:
    # 1 ms end to end: no queue meets it, so the search ramps down to its floor and says so
    objective = Objective(max_e2e_p95_ms=1.0, step_s=4, settle_s=1, start_rate=20, min_rate=5, max_steps=4)
    config = RunConfig(backends=("arq",), redis_url=redis_url, output=out_dir, warmup=10)
    lines: list[str] = []
    found = find_max_rate(config, objective=objective, say=lines.append)
    search = found["arq"]
    assert [s.rate for s in search.steps] == [20, 10, 5]
    assert all(not s.passed and any("e2e p95" in r for r in s.reasons) for s in search.steps)
    assert search.rate is None and search.confidence == "none" and "no step met the objective" in search.note
    assert all(s.drained_after_s is not None and s.not_run == 0 for s in search.steps)
    assert any(line.startswith("[arq] step 3: 5 req/s offered") for line in lines)
    # every step's tasks are audited as one load: 4 s at 20, 10 and 5 per second
    result = load(next(out_dir.glob("*/result.json")))
    (case,) = [c for c in result.cases if isinstance(c, QueueCase)]
    assert case.audit is not None and (case.audit.accepted, case.audit.lost) == (140, 0)
    assert case.summary.sustainable_rps is None and case.rate_search == search
    console = Console(file=io.StringIO(), width=200)
    table.render(result, console)
    text = console.file.getvalue()  # type: ignore[attr-defined]
    assert "arq: the search's steps" in text and "arq: no sustainable rate (confidence none" in text


def test_a_search_that_meets_its_bound_brackets_a_rate(redis_url: str, out_dir: Path) -> None:
    # a generous bound and few steps: the first steps meet it; the result says what it knows
    objective = Objective(max_e2e_p95_ms=60_000, max_growth_pct=50, step_s=4, settle_s=1, start_rate=10,
                          max_steps=2)
    result = search_run(RunConfig(backends=("arq",), redis_url=redis_url, output=out_dir, warmup=10),
                        objective=objective, say=lambda _: None)
    (case,) = [c for c in result.cases if isinstance(c, QueueCase)]
    search = case.rate_search
    assert search is not None and [s.rate for s in search.steps] == [10, 20]
    assert all(s.passed for s in search.steps)
    assert search.rate == 20 and search.upper is None and search.confidence == "lower bound"
    assert case.summary.sustainable_rps == 20 and result.passed()
