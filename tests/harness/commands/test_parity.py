"""``taskbench parity``: the libraries' own published benchmark shapes beside ``taskbench drain``.

The parity is kept by order, never by speed: two libraries that a library's own script puts apart
(their runs' ranges do not overlap) must not be put the other way round, apart, by ``taskbench drain``
with the ledger off. A small version runs here: SAQ's benchmarks/simple.py shape for SAQ and RQ, whose
rates differ by an order of magnitude on any machine.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from taskbench.report.parity import order, separated, summarize


def _figure(low: float, high: float) -> dict[str, float]:
    return {"median": (low + high) / 2, "min": low, "max": high, "runs": 3}


def test_two_libraries_are_ordered_only_where_their_ranges_are_apart() -> None:
    assert separated(_figure(10, 20), _figure(21, 30)) == -1
    assert separated(_figure(21, 30), _figure(10, 20)) == 1
    assert separated(_figure(10, 25), _figure(21, 30)) == 0, "overlapping ranges: no order"
    assert separated(None, _figure(1, 2)) == 0, "a library without a figure has no place"
    rows = [{"library": "a", "script": _figure(100, 110), "off": _figure(50, 60)},
            {"library": "b", "script": _figure(10, 20), "off": _figure(70, 80)},
            {"library": "c", "script": _figure(1, 2), "off": _figure(55, 65)}]
    found = order(rows)
    assert found["contradict"] == ["a > b"], "the script puts a above b, the drain b above a, both apart"
    assert found["within"] == ["a > c"], "the drain's ranges of a and c overlap: nothing to compare"
    assert found["agree"] == ["b > c"]


def test_the_table_takes_medians_ranges_and_the_ledgers_ratio_from_the_rows() -> None:
    result = {"tasks_override": None, "sources": [{"name": "s", "shapes": [
        {"library": "saq", "tasks": 100, "concurrency": 10, "published_per_s": 2000.0}]}],
        "rows": [{"source": "s", "library": "saq", "kind": kind, "round": n, "tasks_per_s": rate,
                  "worker_cpu_us_per_task": 400.0}
                 for n, (kind, rate) in enumerate([("script", 90.0), ("off", 100.0), ("on", 80.0),
                                                   ("script", 110.0), ("off", 120.0), ("on", 96.0)])]}
    (row,) = summarize(result)
    assert row["script"] == {"median": 100.0, "min": 90.0, "max": 110.0, "runs": 2}
    assert row["on_off"] == pytest.approx(88 / 110)
    assert row["off_vs_script"] == pytest.approx(0.10)


def test_several_runs_render_as_one_with_each_runs_task_count() -> None:
    from taskbench.report.parity import merge

    def run(library: str, tasks: int) -> dict[str, object]:
        return {"tasks_override": tasks, "sources": [{"name": "s", "shapes": [
            {"library": library, "tasks": 20_000, "concurrency": 10, "published_per_s": None}]}],
            "rows": [{"source": "s", "library": library, "kind": "script", "round": 0, "tasks_per_s": 5.0}]}

    rows = summarize(merge([run("saq", 2000), run("rq", 300), run("saq", 2000)]))
    assert [(r["library"], r["tasks"], r["script"]["runs"]) for r in rows] == [("saq", 2000, 2), ("rq", 300, 1)]


#: the end-to-end parity run's task count per run
TASKS = 100


@pytest.mark.slow
def test_the_scripts_order_is_the_drains_order_with_the_ledger_off(tmp_path: Path) -> None:
    from taskbench.backends.shapes import source
    from taskbench.harness.commands.parity import run_parity

    # 100 tasks: RQ forks a work horse per job (~20 a second), SAQ runs hundreds a second even here, so two
    # rounds of each keep the two ranges an order of magnitude apart (with 40, one run in CI fell short of
    # every task; the failure now names the run and its log)
    result = run_parity([source("saq")], rounds=2, output=tmp_path, libraries=["saq", "rq"], tasks=TASKS,
                        ledger=(False,), timeout=300, say=lambda _: None)
    kinds = sorted((r["library"], r["kind"]) for r in result["rows"])
    assert kinds == sorted([(lib, kind) for lib in ("saq", "rq") for kind in ("script", "off")] * 2), \
        "two interleaved rounds of the script and the drain, per library"
    assert all(r["executed"] == TASKS for r in result["rows"]), [(r["library"], r["kind"], r["executed"], r.get("log"))
                                                                 for r in result["rows"]]
    assert json.loads((Path(result["folder"]) / "parity.json").read_text())["rows"] == result["rows"]
    found = order(summarize(result))
    assert not found["contradict"], f"taskbench drain orders these libraries against their own script: {found}"
    assert found["agree"] == ["saq > rq"], f"an order of magnitude apart by both measures: {found}"


def test_the_table_gives_the_scripts_own_enqueue_and_drain_seconds() -> None:
    from taskbench.report.parity import markdown

    result = {"tasks_override": 100_000, "sources": [{"name": "saq", "repo": "tobymao/saq", "commit": "fe86758c50",
              "results": "r", "setup": "s", "shapes": [
                  {"library": "arq", "tasks": 1000, "concurrency": 10, "published_per_s": None}]}],
              "rows": [{"source": "saq", "library": "arq", "kind": "script", "round": 0, "tasks": 100_000,
                        "tasks_per_s": 200.0, "enqueue_s": 18.29, "drain_s": 501.14,
                        "worker_cpu_us_per_task": 900.0}],
              "versions": "article-000", "environments": {"arq@article-000": {"packages": {"arq": "0.25.0"}}}}
    (row,) = summarize(result)
    assert row["version"] == "0.25.0", "a script-only run names the version from its environment"
    assert "Versions here: arq 0.25.0 (the pinned environment article-000)." in markdown(result)
    assert row["script_enqueue_s"]["median"] == 18.29 and row["script_drain_s"]["median"] == 501.14
    assert row["off"] is None and row["on_off"] is None, "a script-only run has no drain beside it"
    result["rows"].append({"source": "saq", "library": "arq", "kind": "script", "round": 1, "tasks": 300_000,
                           "tasks_per_s": None, "enqueue_s": 2.5, "drain_s": None, "executed": 0, "enqueued": 0,
                           "stage": "enqueue", "error": "redis.exceptions.TimeoutError: Timeout connecting to server"})
    assert ("Failed: arq's own script, 300,000 tasks, at its enqueue: redis.exceptions.TimeoutError: Timeout "
            "connecting to server (0 enqueued in 2.5 s).") in markdown(result)
    line = next(x for x in markdown(result).splitlines() if x.startswith("| arq |"))
    assert line.endswith("| 18.3 · 501.1 |") and "| 100,000, 10 |" in line, line


@pytest.mark.slow
def test_ledger_none_runs_the_script_alone(tmp_path: Path) -> None:
    from taskbench.backends.shapes import source
    from taskbench.harness.commands.parity import run_parity

    result = run_parity([source("saq")], rounds=1, output=tmp_path, libraries=["saq"], tasks=200, ledger=(),
                        timeout=300, say=lambda _: None)
    assert [(r["library"], r["kind"]) for r in result["rows"]] == [("saq", "script")]
    # every task ran; SAQ's own shape is at-least-once (its sweep may run a job again on a loaded machine)
    assert result["rows"][0]["executed"] >= 200, result["rows"][0]
    assert result["rows"][0]["enqueue_s"] > 0 and result["rows"][0]["drain_s"] > 0


@pytest.mark.slow
def test_a_library_error_at_enqueue_is_the_runs_result_at_once() -> None:
    """SAQ 0.12.4 (no connect() before the first enqueue) against a port nothing listens on: the script
    names the library's error in its JSON line and exits 3 at once, its 50,000 gathered tasks left
    uncancelled (in Python 3.11 that cancellation takes minutes to hours)."""
    from taskbench.harness.commands.parity import SCRIPT_FAILED
    from taskbench.harness.processes.envs import ensure_pinned
    from taskbench.net import free_port

    python = ensure_pinned("article-000")
    argv = [str(python), "-m", "taskbench.backends.saq.published", "--redis-url", f"redis://127.0.0.1:{free_port()}/0",
            "--prefix", "taskbench:parity-t1:", "--tasks", "50000", "--concurrency", "10", "--enqueue", "gather",
            "--parallel", "20", "--timing", "poll", "--timeout", "30"]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == SCRIPT_FAILED, done.stderr[-2000:]
    row = json.loads(done.stdout.strip().splitlines()[-1])
    assert row["stage"] == "enqueue" and row["enqueued"] == 0 and row["tasks_per_s"] is None
    assert "ConnectionError" in row["error"], row["error"]


@pytest.mark.slow
def test_a_pinned_environment_runs_the_script_on_its_versions(tmp_path: Path) -> None:
    from taskbench.backends.shapes import source
    from taskbench.harness.commands.parity import run_parity

    result = run_parity([source("saq")], rounds=1, output=tmp_path, libraries=["saq", "arq"], tasks=100, ledger=(),
                        timeout=300, versions_set="article-000", say=lambda _: None)
    # the libraries in registry order (their packages declare their runs)
    assert [(r["library"], r["kind"], r["executed"]) for r in result["rows"]] == [("arq", "script", 100),
                                                                                   ("saq", "script", 100)]
    assert result["environments"]["arq@article-000"]["packages"]["arq"] == "0.25.0"
    assert sorted(r["version"] for r in summarize(result)) == ["0.12.4", "0.25.0"]
    with pytest.raises(ValueError, match="holds arq, saq, faststream-pubsub, celery, not rq"):
        run_parity([source("saq")], rounds=1, output=tmp_path, libraries=["rq"], tasks=100, ledger=(),
                   versions_set="article-000", say=lambda _: None)


def test_a_wrong_source_or_library_is_one_line() -> None:
    shown = subprocess.run([sys.executable, "-m", "taskbench", "parity", "--help"], capture_output=True, text=True,
                           timeout=60, check=False)
    assert shown.returncode == 0 and "Usage" in shown.stdout and "Traceback" not in shown.stdout + shown.stderr
    for args, expected in ((["--sources", "nope"], "unknown published benchmark 'nope'"),
                           (["--sources", "saq", "--backends", "huey"], "--backends: huey in none of the sources"),
                           (["--ledger", "maybe"], "--ledger must be off, on, both or none"),
                           (["--sources", "saq", "--versions", "nope"], "no pinned environment 'nope'"),
                           (["--sources", "saq", "--backends", "rq", "--versions", "article-000"],
                            "the pinned environment 'article-000' holds arq, saq")):
        done = subprocess.run([sys.executable, "-m", "taskbench", "parity", *args], capture_output=True, text=True,
                              timeout=60, check=False)
        assert done.returncode == 2, done.stderr
        assert expected in done.stderr and "Traceback" not in done.stderr, done.stderr
