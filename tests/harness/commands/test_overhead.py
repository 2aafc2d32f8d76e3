"""``taskbench overhead``: three servers per backend, loaded in every round (together or one after another); a
loadable result and its ratio."""

from __future__ import annotations

import itertools
import json
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

import psutil
import pytest

from taskbench.harness.commands.overhead import PAIRS, order, pairs, server_argv
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


def _overhead(redis_url: str, tmp_path: Path, *args: str) -> tuple[dict[str, Any], OverheadCase]:
    before = {p.pid for p in psutil.Process().children(recursive=True)}
    out = subprocess.run([sys.executable, "-m", "taskbench", "overhead", "--backends", "background", "--requests",
                          "300", "--warmup", "20", "--users", "10", "--redis-url", redis_url,
                          "--output", str(tmp_path), "--format", "json", *args],
                         capture_output=True, text=True, timeout=300, check=False)
    assert out.returncode == 0, out.stdout + out.stderr
    assert {p.pid for p in psutil.Process().children(recursive=True)} <= before, "no server left running"
    printed = json.loads(out.stdout)
    result = load(Path(printed["result"]))
    assert result.kind == "overhead"
    (case,) = result.cases
    assert isinstance(case, OverheadCase) and case.status == "ok", case.failures
    # a round of a few hundred requests may read under two clock ticks of CPU: no figure rather than 0 µs
    assert all(r.cpu_us_per_request is None or r.cpu_us_per_request > 0 for r in case.rounds)
    assert any(r.cpu_us_per_request for r in case.rounds), [r.server_cpu_s for r in case.rounds]
    assert not any(r.load.errors for r in case.rounds)
    assert printed["backends"]["background"]["ratio"] == pytest.approx(case.ratio)
    return printed, case


def test_pairs_alternate_which_pair_goes_first_and_who_connects_first() -> None:
    rounds = [pairs(r) for r in range(4)]
    assert all(sorted(tuple(sorted(p)) for p in r) == [("ceiling", "floor"), ("floor", "taskbench")] for r in rounds)
    assert {frozenset(r[0]) for r in rounds} == {frozenset(PAIRS[0]), frozenset(PAIRS[1])}, "either pair first"
    assert {r[0][0] for r in rounds} >= {"floor", "taskbench"}, "either server of the ratio's pair first"


def test_overhead_loads_two_servers_at_a_time_over_the_same_seconds(redis_url: str, tmp_path: Path) -> None:
    # two rounds: each pair goes first in one of them (pairs()), and a round starts three servers
    printed, case = _overhead(redis_url, tmp_path, "--repeat", "2")
    assert case.method == printed["method"] == "together"
    expected = {("floor", "taskbench"), ("taskbench", "floor"), ("ceiling", "floor"), ("floor", "ceiling")}
    for round_ in range(2):
        got = [r for r in case.rounds if r.round == round_]
        assert {(r.server, r.beside) for r in got} == expected
        assert [(r.server, r.beside) for r in got][::2] == [p for p in pairs(round_)], "the round's order"
        for first, second in zip(got[::2], got[1::2], strict=True):
            # one driver loads both until the first has had its 300: the other stops with it
            assert max(first.load.ok, second.load.ok) == 300 and min(first.load.ok, second.load.ok) > 0
            assert abs(first.load.first_send - second.load.first_send) < 1, "both start together"
            assert abs(first.load.last_response - second.load.last_response) < 1, "and stop together"
        by = {(r.server, r.beside): r for r in got}
        floor, ours = by["floor", "taskbench"], by["taskbench", "floor"]
        assert case.ratio_rounds[round_] == pytest.approx(ours.load.rps / floor.load.rps)
        assert case.cpu_ratio_rounds[round_] == pytest.approx(floor.cpu_us_per_request / ours.cpu_us_per_request)
    assert case.ratio == pytest.approx(statistics.median(case.ratio_rounds))
    assert case.cpu_ratio == pytest.approx(statistics.median(case.cpu_ratio_rounds))
    beside_ours = [r.load.rps for r in case.rounds if r.server == "floor" and r.beside == "taskbench"]
    assert case.rps["floor"] == pytest.approx(statistics.median(beside_ours)), "the ratio's floor"
    assert printed["backends"]["background"]["rounds"]["floor"] == pytest.approx(beside_ours, abs=0.1), \
        "the floor's rounds in the JSON are those its figure comes from"
    assert case.floor_vs_ceiling == pytest.approx(statistics.median(
        next(r for r in case.rounds if r.round == n and r.server == "floor" and r.beside == "ceiling").load.rps
        / next(r for r in case.rounds if r.round == n and r.server == "ceiling").load.rps for n in range(2)))
    assert printed["backends"]["background"]["ratio_rounds"] == pytest.approx(case.ratio_rounds, abs=1e-4)
    report = subprocess.run([sys.executable, "-m", "taskbench", "report", printed["result"]],
                            capture_output=True, text=True, timeout=60, check=False)
    assert report.returncode == 0 and "background" in report.stdout and "floor" in report.stdout, report.stderr
    assert "servers together" in report.stdout
    page = Path(printed["result"]).with_name("report.html").read_text()
    assert "<table" in page and "side by side" in page and "beside" in page


def test_overhead_sequential_loads_one_server_after_another(redis_url: str, tmp_path: Path) -> None:
    printed, case = _overhead(redis_url, tmp_path, "--repeat", "1", "--method", "sequential")
    assert case.method == printed["method"] == "sequential" and not case.ratio_rounds
    assert [r.server for r in case.rounds] == order(0) and not any(r.beside for r in case.rounds)
    assert all(r.load.ok == 300 for r in case.rounds), "every server answered every request with a 2xx"
    for earlier, later in itertools.pairwise(case.rounds):
        assert earlier.load.last_response <= later.load.first_send, "one after another"
    assert case.ratio == pytest.approx(case.rps["taskbench"] / case.rps["floor"])
    assert case.cpu_ratio == pytest.approx(case.cpu_us_per_request["floor"] / case.cpu_us_per_request["taskbench"])


def test_overhead_refuses_an_unknown_method(tmp_path: Path) -> None:
    out = subprocess.run([sys.executable, "-m", "taskbench", "overhead", "--backends", "background", "--method",
                          "parallel", "--output", str(tmp_path)], capture_output=True, text=True, timeout=60,
                         check=False)
    assert out.returncode != 0
    assert "--method must be one of together, sequential, not 'parallel'" in out.stderr
    assert "Traceback" not in out.stderr and not list(tmp_path.iterdir()), "refused before anything ran"
