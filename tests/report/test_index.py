"""results/index.html: every result under the folder, newest first, linking its report."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from taskbench.report.index import headline
from taskbench.results import QueueCase
from tests.report.synthetic import queue_run

SAMPLES = Path(__file__).parent.parent / "results" / "samples"


def test_report_index_lists_every_result_and_survives_a_bad_one(tmp_path: Path) -> None:
    shutil.copy(SAMPLES / "v1-run-fault.json", (tmp_path / "one").mkdir() or tmp_path / "one" / "result.json")
    shutil.copy(SAMPLES / "v1-scenario-http.json", (tmp_path / "two").mkdir() or tmp_path / "two" / "result.json")
    (tmp_path / "three").mkdir()
    (tmp_path / "three" / "result.json").write_text(queue_run(run_id="synthetic").to_json())
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken" / "result.json").write_text("{}")
    html = subprocess.run([sys.executable, "-m", "taskbench", "report", str(tmp_path / "one" / "result.json"),
                           "--format", "html"], capture_output=True, text=True, timeout=120)
    assert html.returncode == 0, html.stderr
    assert (tmp_path / "one" / "report.html").exists()
    out = subprocess.run([sys.executable, "-m", "taskbench", "report", "--index", "--output", str(tmp_path)],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    page = (tmp_path / "index.html").read_text()
    assert 'href="one/report.html"' in page  # the report where there is one
    assert 'href="two/result.json"' in page  # else the result file
    assert "scenario middleware" in page and "run arq, background" in page
    # a queue case's headline is what the run's table leads with, not its HTTP latency
    assert "background: 629 accepted/s, – executed/s, e2e p95 889 ms" in page
    assert "not a taskbench result" in page
    # newest first
    assert page.index("2026-11-23 18:58:42") < page.index("2026-11-23 18:58:16")


def test_a_queue_case_s_headline_is_its_rates_and_its_e2e_p95() -> None:
    result = queue_run()
    (case,) = result.cases
    assert isinstance(case, QueueCase)
    case.summary.accepted_per_s, case.summary.executed_per_s, case.summary.e2e_p95_ms = 896.0, 198.4, 37_200.0
    case.summary.lost = 3
    assert headline(result) == "arq: 896 accepted/s, 198 executed/s, e2e p95 37 s, 3 lost"
