"""``taskbench run --soak``: the bare option, what does not go with it, and one real soak whose task leaks."""

from __future__ import annotations

from pathlib import Path

import pytest

from taskbench.cli.soak import with_optional_values
from taskbench.report.soak import summary_lines
from taskbench.results import QueueCase, load
from tests.helpers import assert_one_line_error

ROOT = Path(__file__).resolve().parents[3]


@pytest.mark.parametrize(("argv", "expected"), [
    (["run", "--soak"], ["run", "--soak", "30m"]),
    (["run", "--soak", "--rate", "5"], ["run", "--soak", "30m", "--rate", "5"]),
    (["run", "--soak", "2h", "--rate", "5"], ["run", "--soak", "2h", "--rate", "5"]),
    (["run", "--rate", "5"], ["run", "--rate", "5"]),
    (["run", "--", "--soak"], ["run", "--", "--soak"]),
])
def test_soak_alone_takes_its_default(argv: list[str], expected: list[str]) -> None:
    assert with_optional_values(argv) == expected


@pytest.mark.parametrize(("extra", "message"), [
    (["--find-max-rate"], "--soak, --phases and --find-max-rate each decide the load"),
    (["--rate", "5", "--requests", "100"], "leave out --requests and --duration"),
    (["--rate", "5", "--model", "ramp"], "leave out --model ramp"),
    (["--rate", "5", "--soak-share", "200%"], "more than 0% and at most 100%"),
    (["--rate", "5", "--scenario", "faults"], "leave out --target and --scenario"),
])
def test_what_does_not_go_with_a_soak_is_one_line(extra: list[str], message: str, cli: object,
                                                  out_dir: Path) -> None:
    out = cli("run", "--backends", "arq", "--soak", "30m", "--output", str(out_dir), *extra)  # type: ignore[operator]
    assert_one_line_error(out, message)


def test_a_soak_of_a_leaking_task_flags_its_memory(redis_url: str, out_dir: Path, cli: object,
                                                               tmp_path: Path) -> None:
    payload = tmp_path / "leak.json"
    payload.write_text('{"task_id": "{task_id}", "leak_kb": 64}')  # 4.6 GB/h at 20 tasks/s: no noise hides it
    out = cli("run", "--backends", "arq", "--workload", f"{ROOT}/examples/tasks.py:leak", "--payload",  # type: ignore[operator]
              str(payload), "--soak", "20s", "--rate", "20", "--warmup", "20", "--redis-url", redis_url,
              "--output", str(out_dir))
    assert out.exit_code == 1, out.stderr + out.stdout  # a drift fails the case
    case = load(next(out_dir.glob("*/result.json"))).cases[0]
    assert isinstance(case, QueueCase) and case.soak is not None and case.audit is not None
    assert (case.audit.lost, case.audit.duplicated) == (0, 0)
    soak = case.soak
    assert soak.rate == 20 and soak.rate_source == "--rate" and soak.processes == ["worker-0"]
    assert soak.growth["tasks_mb"].drift and soak.growth["tasks_mb"].slope_per_h > 20
    assert soak.drift == [line for line in case.failures if line.startswith("soak:")]
    # the memory drifts; on a loaded machine a 20 s window may also see the latency climb, which is judged apart
    assert any("the task processes' memory grows" in line for line in soak.drift)
    assert {"mem:worker-0", "cpu:worker-0", "tasks_mb", "backlog", "broker_mb", "broker_keys",
            "e2e_p95_ms"} <= set(soak.series)
    assert all(len(values) == len(soak.t_s) for values in soak.series.values())
    assert case.rss is not None and case.rss.end_mb > case.rss.start_mb  # the user's task's memory columns
    printed = out.stderr + out.stdout
    assert "task processes' memory" in printed and "DRIFT" in printed
    assert summary_lines(soak)[0].startswith("soak 0.333 min at 20/s (--rate)")
    page = next(out_dir.glob("*/report.html")).read_text()
    assert "Memory of the task processes" in page and "DRIFT" in page
