"""``taskbench choose`` on real backends with tiny budgets: every stage measured, the answer and the page
written, and ``--from`` answering again from the kept figures."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from taskbench.harness.commands.choose import Budget, Chooser, candidates, durable_backends
from taskbench.harness.config import RunConfig
from taskbench.report.choose import recommend, render
from taskbench.results.choose import ChooseResult, Constraints
from tests.helpers import assert_one_line_error

ROOT = Path(__file__).resolve().parents[3]
TINY = Budget(drain_tasks=300, drain_s=3.0, scaled=1, finalists=1, step_s=3.0, settle_s=1.0, max_steps=2,
              fault_duration_s=4.5, soak_s=0.0)


def test_the_candidates_are_background_and_the_durable_backends_not_the_unsafe_wiring() -> None:
    names = durable_backends()
    assert "arq" in names and "procrastinate" in names
    assert "background" not in names and "faststream-pubsub" not in names
    assert candidates() == ["background", *names]


@pytest.mark.parametrize(("args", "message"), [
    (["--backends", "nope"], "nope"),
    (["--promise", "exactly-once"], "--promise must be at-least-once or any"),
    (["--rate", "0"], "--rate"),
    (["--p95", "soon"], "--p95"),
    (["--max-workers", "0"], "--max-workers"),
    (["--workload", "nope"], "unknown workload"),
    (["--workload", "missing.py:task"], "no such file"),
    (["--payload", "examples/payload.json"], "--payload, --with and --path go with your own task"),
])
def test_a_bad_constraint_is_one_line(cli: object, out_dir: Path, args: list[str], message: str) -> None:
    out = cli("choose", *args, "--output", str(out_dir))  # type: ignore[operator]
    assert_one_line_error(out, message)


def test_from_a_folder_without_a_choose_run_is_one_line(cli: object, tmp_path: Path) -> None:
    out = cli("choose", "--from", str(tmp_path))  # type: ignore[operator]
    assert_one_line_error(out, "no choose.json there")
    (tmp_path / "choose.json").write_text('{"kind": "choose"}')
    out = cli("choose", "--from", str(tmp_path))  # type: ignore[operator]
    assert_one_line_error(out, "is not a choose result")


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_choose_screens_scales_and_measures_the_finalist_of_the_users_task(out_dir: Path, cli: object) -> None:
    base = RunConfig(backends=("background", "dramatiq", "arq"), workload=str(ROOT / "examples/tasks.py:call_stub"),
                     payload=str(ROOT / "examples/payload.json"))
    k = Constraints(workload="examples/tasks.py:call_stub", rate=30.0, max_workers=2)
    chooser = Chooser(["background", "dramatiq", "arq"], base, k, TINY, out_dir, quick=True, say=lambda _: None)
    result = chooser.run()
    by_name = {c.backend: c for c in result.candidates}
    # promise: background's tasks die with the API, so at-least-once leaves it out unmeasured
    assert by_name["background"].stage == "promise" and not by_name["background"].drains
    # screen: one worker of each queue drained the user's task, every call ran, with its CPU and memory
    for name in ("dramatiq", "arq"):
        one = by_name[name].drain(1)
        assert one is not None and one.rate and one.executed > 0 and one.failed == 0, by_name[name].drains
        assert one.worker_cpu_us and one.broker_cpu_us is not None and one.rss_mb, one
        for drain in by_name[name].drains:  # each drain's figures are a file of their own
            assert json.loads(Path(drain.source).read_text())["backend"] == name, drain.source
    # scale: the best of the screen drained again with two workers; the other stopped at the screen
    scaled = [c for c in result.candidates if c.stage in ("scale", "finalist")]
    assert len(scaled) == 1 and scaled[0].drain(2) is not None, [c.drains for c in scaled]
    (final,) = [c for c in result.candidates if c.stage == "finalist"]
    assert final.workers == 1 and final.sustainable.value and final.p95.value is not None, final
    assert [f.fault for f in final.faults] == ["kill-worker@2", "restart-broker@2"]
    for fault in final.faults:  # both keep their promise under both faults (docs/faults.md)
        assert fault.injected and fault.kept, fault
    assert not result.broken()
    for path in result.results:
        assert Path(path).exists(), path
    lines = recommend(result)
    assert lines[0].startswith(f"for examples/tasks.py:call_stub at 30/s, at-least-once, p95 ≤ 1 s: {final.backend} "
                               "with 1 worker"), lines
    assert any(line.startswith("background: left at the promise") for line in lines), lines
    assert f"{final.backend} with 1 worker" in render(result)
    # the kept figures answer again with another rate and another promise, measuring nothing
    folder = chooser.out
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "choose.json").write_text(result.model_dump_json())
    again = cli("choose", "--from", str(folder), "--rate", "20000", "--promise", "any")  # type: ignore[operator]
    assert again.exit_code == 0, again.stderr
    assert again.stdout.startswith("for examples/tasks.py:call_stub at 20,000/s, any, p95 ≤ 1 s: no backend meets")
    assert (folder / "choose.html").exists()
    assert ChooseResult.model_validate(json.loads((folder / "choose.json").read_text())) == result
