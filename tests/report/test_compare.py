"""compare: Mann–Whitney U against hand-computed values, and the verdicts on synthetic runs."""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path

import pytest

from taskbench.report.compare import compare
from taskbench.report.compare_view import render_html
from taskbench.report.stats import counted, mann_whitney
from tests.report.synthetic import queue_run


def test_mann_whitney_matches_the_normal_approximation_by_hand() -> None:
    test = mann_whitney(counted([1, 2, 3, 4, 5]), counted([6, 7, 8, 9, 10]))
    # U = 0, mean 12.5, variance 25 * 11 / 12; z = (12.5 - 0.5) / sd
    z = 12.0 / math.sqrt(25 * 11 / 12)
    assert test.u == 0 and test.p == pytest.approx(math.erfc(z / math.sqrt(2)))
    assert test.p == pytest.approx(0.0122, abs=5e-4)
    assert test.b_larger == 1.0
    same = mann_whitney(counted([3, 3, 3]), counted([3, 3, 3]))
    assert same.p == 1.0
    # weighted samples are the same test as the expanded ones
    weighted = mann_whitney([(1.0, 3), (2.0, 2)], [(2.0, 1), (5.0, 4)])
    expanded = mann_whitney(counted([1, 1, 1, 2, 2]), counted([2, 5, 5, 5, 5]))
    assert weighted.p == pytest.approx(expanded.p) and weighted.u == expanded.u
    assert not mann_whitney(counted([1, 2]), counted([3, 4, 5])).decided


def test_a_run_against_itself_changes_nothing() -> None:
    run = queue_run()
    cmp = compare(run, run)
    assert cmp.regressions == []
    assert {m.verdict for m in cmp.cases[0].metrics} <= {"same", "untested"}


def test_noise_is_not_a_regression_and_a_shift_is() -> None:
    base = queue_run(seed=1)
    other_seed = compare(base, queue_run(seed=2))
    assert other_seed.regressions == [], other_seed.regressions
    slower = compare(base, queue_run(seed=3, rps=400, latency_ms=30, e2e_ms=80, lost=2))
    assert set(slower.regressions) >= {"arq: RPS", "arq: median latency", "arq: p95 latency", "arq: e2e p95",
                                       "arq: lost"}
    faster = compare(base, queue_run(seed=3, latency_ms=10))
    assert faster.regressions == []
    assert any(m.verdict == "better" for m in faster.cases[0].metrics)


def test_the_threshold_hides_small_significant_changes() -> None:
    base = queue_run(seed=1)
    slightly = queue_run(seed=1, latency_ms=22)  # 10 % slower, thousands of samples: significant, small
    assert "arq: median latency" in compare(base, slightly, threshold=0.05).regressions
    assert "arq: median latency" not in compare(base, slightly, threshold=0.15).regressions


def test_html_draws_both_runs_on_the_same_axes() -> None:
    a, b = queue_run(seed=1), queue_run(seed=2, latency_ms=30)
    page = render_html([a, b], ["A", "B"], [compare(a, b, label_a="A", label_b="B")], threshold=0.05, alpha=0.05)
    assert page.count("<svg") == 3
    assert "A requests/s" in page and "B requests/s" in page


def test_the_command_exits_1_naming_the_regressed_metrics(tmp_path: Path) -> None:
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    a.write_text(queue_run(seed=1).to_json())
    b.write_text(queue_run(seed=2, latency_ms=40).to_json())

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "taskbench", "compare", *args], capture_output=True,
                              text=True, timeout=60)

    same = cli(str(a), str(a))
    assert same.returncode == 0, same.stderr
    worse = cli(str(a), str(b), "--threshold", "5%", "--format", "html", "--out-file", str(tmp_path / "c.html"))
    assert worse.returncode == 1
    assert "regressed:" in worse.stderr and "median latency" in worse.stderr
    assert (tmp_path / "c.html").read_text().count("<svg") == 3
