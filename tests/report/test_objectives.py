"""compare's fixed objectives (--fail-if), its gating metrics (--metrics) and its JSON verdict, on committed
results: v2-run-arq.json is a real 5 s run of arq (`run --backends arq --duration 5 --rate 200`), clean."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from taskbench.cli import app
from taskbench.report.compare import compare
from taskbench.report.objectives import FIGURES, GATED, ObjectiveError, check, parse
from taskbench.results import load
from tests.helpers import assert_one_line_error
from tests.report.synthetic import queue_run

SAMPLES = Path(__file__).resolve().parents[1] / "results" / "samples"
RUN = SAMPLES / "v2-run-arq.json"  # one queue case: arq, lost 0, e2e p95 ~1.7 s
FAULT = SAMPLES / "v1-run-fault.json"  # two queue cases: background and arq
HTTP = SAMPLES / "v1-scenario-http.json"  # an HTTP case: no tasks, so no lost


def cli(*args: str) -> Result:
    return CliRunner().invoke(app, ["compare", *args])


@pytest.mark.parametrize(("text", "metric", "op", "value"), [
    ("e2e_p95 > 500ms", "e2e_p95", ">", 500.0),
    ("e2e_p95>0.5s", "e2e_p95", ">", 500.0),
    ("time_to_run_all >= 1500ms", "time_to_run_all", ">=", 1.5),
    ("errors != 1%", "errors", "!=", 1.0),
    ("rps < 100/s", "rps", "<", 100.0),
    ("lost > 0", "lost", ">", 0.0),
    ("  duplicated == 2 ", "duplicated", "==", 2.0),
    ("request_p99 <= 1e3", "request_p99", "<=", 1000.0),
])
def test_an_objective_is_a_metric_an_operator_and_a_value_in_the_metrics_unit(
        text: str, metric: str, op: str, value: float) -> None:
    objective = parse(text)
    assert (objective.metric, objective.op) == (metric, op) and objective.value == pytest.approx(value)


@pytest.mark.parametrize(("text", "message"), [
    ("e2e_p95", "write METRIC OP VALUE"),
    ("e2e_p95 > fast", "write METRIC OP VALUE"),
    ("e2e_p95 > nan", "write METRIC OP VALUE"),
    ("e2e_p95 > inf", "write METRIC OP VALUE"),
    ("e2e_p95 => 1", "write METRIC OP VALUE"),
    ("e2e_p95 > 1 ms ms", "write METRIC OP VALUE"),
    ("p95 > 1ms", "no metric 'p95'; the metrics: rps, "),
    ("lost > 1ms", "lost counts tasks; write its value with no unit"),
    ("errors > 1ms", "errors is in %; write its value with '%'"),
    ("e2e_p95 > 1%", "e2e_p95 is in ms; write its value with 'ms' or 's'"),
])
def test_a_malformed_objective_says_what_is_wrong(text: str, message: str) -> None:
    with pytest.raises(ObjectiveError, match=r"^--fail-if") as caught:
        parse(text)
    assert message in str(caught.value) and "\n" not in str(caught.value)


def test_every_gating_metric_is_a_figure_an_objective_can_bound() -> None:
    assert set(GATED) <= set(FIGURES)


def test_each_case_of_a_result_is_checked_on_its_own() -> None:
    (checked,) = check([parse("e2e_p95 > 1s")], [("new", load(FAULT))])
    assert [(c.case, c.breached) for c in checked.cases] == [("background", False), ("arq", True)]
    assert not checked.passed
    (clean,) = check([parse("lost > 0")], [("new", load(FAULT))])
    assert clean.passed and [c.value for c in clean.cases] == [0, 0]


def test_a_clean_result_against_itself_passes_lost_above_0() -> None:
    out = cli(str(RUN), str(RUN), "--fail-if", "lost > 0")
    assert out.exit_code == 0, out.stderr
    assert "objective lost > 0 met by every case (1)" in out.stderr


def test_a_breached_objective_exits_1_naming_the_objective_the_case_and_the_value() -> None:
    out = cli(str(RUN), str(RUN), "--fail-if", "e2e_p95 > 1ms", "--fail-if", "lost > 0")
    assert out.exit_code == 1, out.stderr
    e2e_p95 = load(RUN).cases[0].summary.e2e_p95_ms
    assert f"objective e2e_p95 > 1ms breached: B v2-run-arq arq e2e_p95 = {e2e_p95:.6g} ms" in out.stderr
    assert "objective lost > 0 met" in out.stderr
    assert "no metric got significantly worse" in out.stderr  # the result against itself: no regression


def test_one_result_alone_is_checked_against_its_objectives() -> None:
    assert cli(str(RUN), "--fail-if", "lost > 0").exit_code == 0
    out = cli(str(FAULT), "--fail-if", "e2e_p95 > 3s")
    assert out.exit_code == 1 and "v1-run-fault arq e2e_p95" in out.stderr
    assert "background" not in out.stderr  # 889 ms: within the bound
    assert_one_line_error(cli(str(RUN)), "give at least two result files")
    assert_one_line_error(cli(str(RUN), "--fail-if", "lost > 0", "--metrics", "lost"), "give the baseline's")


@pytest.mark.parametrize("objective", ["e2e_p95 >", "e2e_p95 > 5 parsecs", "latency > 5ms"])
def test_a_malformed_objective_is_one_line_and_exit_2(objective: str) -> None:
    out = cli(str(RUN), str(RUN), "--fail-if", objective)
    assert_one_line_error(out, f"--fail-if {objective!r}")
    assert len(out.stderr.strip().splitlines()) == 1


def test_an_objective_no_case_measures_fails_the_gate() -> None:
    out = cli(str(HTTP), "--fail-if", "lost > 0")
    assert out.exit_code == 1 and "objective lost > 0: no case measures lost" in out.stderr


def test_only_the_chosen_metrics_gate_by_significance(tmp_path: Path) -> None:
    base, slower = tmp_path / "base.json", tmp_path / "slower.json"
    base.write_text(queue_run(seed=1).to_json())
    slower.write_text(queue_run(seed=2, latency_ms=40).to_json())
    assert cli(str(base), str(slower)).exit_code == 1
    gated = cli(str(base), str(slower), "--metrics", "lost,duplicated")
    assert gated.exit_code == 0, gated.stderr
    assert "worse, not gated" in gated.stdout and "a regression only in: duplicated, lost" in gated.stdout
    assert cli(str(base), str(slower), "--metrics", "request_p50").exit_code == 1
    assert cli(str(base), str(slower), "--metrics", "none").exit_code == 0
    assert_one_line_error(cli(str(base), str(slower), "--metrics", "lost,latency"),
                          "--metrics: no metric latency; the metrics: rps, request_p50")
    narrowed = compare(queue_run(seed=1), queue_run(seed=2, latency_ms=40), gating=frozenset({"lost"}))
    assert narrowed.regressions == [] and narrowed.cases[0].worse


def test_the_json_verdict_holds_the_status_the_objectives_and_the_regressions(tmp_path: Path) -> None:
    base, slower = tmp_path / "base.json", tmp_path / "slower.json"
    base.write_text(queue_run(seed=1).to_json())
    slower.write_text(queue_run(seed=2, latency_ms=40).to_json())
    out = cli(str(base), str(slower), "--fail-if", "lost > 0", "--fail-if", "request_p50 > 1s",
              "--metrics", "request_p50", "--format", "json")
    assert out.exit_code == 1
    verdict = json.loads(out.stdout)
    assert verdict["status"] == 1
    assert [(o["objective"], o["passed"]) for o in verdict["objectives"]] == [("lost > 0", True),
                                                                             ("request_p50 > 1s", True)]
    assert verdict["objectives"][1]["value"] == 1000.0 and verdict["objectives"][1]["unit"] == "ms"
    assert [(r["case"], r["metric"]) for r in verdict["regressions"]] == [("arq", "request_p50")]
    regression = verdict["regressions"][0]
    assert regression["value"] > regression["baseline_value"] and regression["p"] < 0.05
    (comparison,) = verdict["comparisons"]
    assert comparison["gating"] == ["request_p50"]
    assert {m["metric"] for m in comparison["metrics"] if m["verdict"] == "worse" and not m["gated"]}
    clean = cli(str(RUN), "--fail-if", "lost > 0", "--format", "json")
    assert clean.exit_code == 0 and json.loads(clean.stdout)["status"] == 0
