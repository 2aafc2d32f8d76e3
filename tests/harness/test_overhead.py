"""``taskbench overhead``: three servers per backend, each loaded in every round; a loadable result and its ratio."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import psutil
import pytest

from taskbench.harness.overhead import order, server_argv
from taskbench.results import OVERHEAD_SERVERS, OverheadCase, load

pytestmark = pytest.mark.slow


def test_order_rotates_so_each_server_takes_each_place() -> None:
    rounds = [order(r) for r in range(3)]
    assert all(sorted(r) == sorted(OVERHEAD_SERVERS) for r in rounds)
    assert {r[0] for r in rounds} == set(OVERHEAD_SERVERS)


@pytest.mark.parametrize("server", ["ceiling", "floor"])
def test_floor_gc_freeze_freezes_the_ceiling_and_floor_once_built(server: str) -> None:
    plain = server_argv(server, "arq", Path(sys.executable), 8000)
    frozen = server_argv(server, "arq", Path(sys.executable), 8000, frozen=True)
    assert "gc.freeze()" not in plain[-1]
    assert "gc.freeze()" in frozen[-1] and frozen[-1].index("gc.freeze()") < frozen[-1].index("uvicorn.run")
    compile(frozen[-1], "<floor>", "exec")  # what `python -c` runs
    ours = server_argv("taskbench", "arq", Path(sys.executable), 8000, frozen=True)
    assert ours[1:4] == ["-m", "taskbench", "serve"], "the reference API freezes itself (TASKBENCH_GC_FREEZE)"


def test_overhead_loads_ceiling_floor_and_api_and_records_them(redis_url: str, tmp_path: Path) -> None:
    before = {p.pid for p in psutil.Process().children(recursive=True)}
    out = subprocess.run([sys.executable, "-m", "taskbench", "overhead", "--backends", "background", "--requests",
                          "300", "--rounds", "2", "--warmup", "20", "--users", "10", "--redis-url", redis_url,
                          "--output", str(tmp_path), "--format", "json"],
                         capture_output=True, text=True, timeout=300, check=False)
    assert out.returncode == 0, out.stdout + out.stderr
    printed = json.loads(out.stdout)
    result = load(Path(printed["result"]))
    assert result.kind == "overhead"
    (case,) = result.cases
    assert isinstance(case, OverheadCase) and case.status == "ok", case.failures
    assert sorted((r.round, r.server) for r in case.rounds) == sorted(
        (r, s) for r in range(2) for s in OVERHEAD_SERVERS)
    assert all(r.load.ok == 300 for r in case.rounds), "every server answered every request with a 2xx"
    assert case.ratio == pytest.approx(case.rps["taskbench"] / case.rps["floor"])
    assert all(r.cpu_us_per_request and r.cpu_us_per_request > 0 for r in case.rounds)
    assert case.cpu_ratio == pytest.approx(case.cpu_us_per_request["floor"] / case.cpu_us_per_request["taskbench"])
    assert printed["backends"]["background"]["ratio"] == pytest.approx(case.ratio)
    report = subprocess.run([sys.executable, "-m", "taskbench", "report", printed["result"]],
                            capture_output=True, text=True, timeout=60, check=False)
    assert report.returncode == 0 and "background" in report.stdout and "floor" in report.stdout, report.stderr
    assert "<table" in Path(printed["result"]).with_name("report.html").read_text()
    assert {p.pid for p in psutil.Process().children(recursive=True)} <= before, "no server left running"
