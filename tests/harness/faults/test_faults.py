"""Fault injection: specs, the recovery measure, kill-and-restart of real processes, and whole runs."""

from __future__ import annotations

import contextlib
import json
import re
import sys
from pathlib import Path

import psutil
import pytest

from taskbench.driver import LoadSpec
from taskbench.harness.faults.kinds import Fault, paced_for
from taskbench.harness.faults.recovery import recovery
from taskbench.harness.processes.process_set import ProcessSet
from taskbench.wait import wait_until
from tests.helpers import harness_cli


@pytest.mark.parametrize(
    ("text", "fragment"),
    [("kill-redis@2", "unknown fault 'kill-redis'"), ("kill-worker", "say when"),
     ("kill-api@soon", "'soon' is not a duration"), ("kill-api@0", "in (0, 3600]"),
     ("pause-worker@2", "say how long pause-worker lasts"), ("kill-api@2+3", "takes no duration"),
     ("pause-worker@2/3", "does not repeat"), ("kill-worker@2/0", "the period (/P) must be in"),
     ("stall-broker@1+x", "'x' is not a duration"), ("kill-api@2h", "in (0, 3600]")],
)
def test_bad_fault_specs_say_what_is_wrong(text: str, fragment: str) -> None:
    with pytest.raises(ValueError, match=re.escape(fragment)):
        Fault.parse(text)


def test_fault_spec() -> None:
    fault = Fault.parse(" kill-worker@2.5 ")
    assert (fault.kind, fault.at, fault.target, fault.describe()) == ("kill-worker", 2.5, "worker-0",
                                                                     "kill-worker@2.5")
    assert Fault.parse("kill-api@1").target == "api"
    pause = Fault.parse("pause-worker@2+8")
    assert (pause.target, pause.duration, pause.period, pause.describe()) == ("worker-0", 8.0, None,
                                                                              "pause-worker@2+8")
    repeated = Fault.parse("kill-worker@1/1.5")
    assert (repeated.at, repeated.period, repeated.describe()) == (1.0, 1.5, "kill-worker@1/1.5")
    assert Fault.parse("stall-broker@3+2").target == "broker"
    assert Fault.parse("pause-worker@1m+500ms").describe() == "pause-worker@60+0.5"  # durations as everywhere


def _steady(start: float, end: float, per_s: int) -> list[float]:
    n = round((end - start) * per_s)
    return [start + i / per_s for i in range(n)]


def test_a_count_bounded_load_is_paced_past_its_fault() -> None:
    # 3000 requests over 100 users, a kill at 2 s: each user at most one every 0.133 s, 750 req/s at most,
    # so the 3000 take at least 4 s (2 x the fault's end) on a backend that could take them in one
    load = LoadSpec(users=100, requests=3000)
    paced, line = paced_for(load, Fault.parse("kill-worker@2")) or (None, "")
    assert paced is not None and paced.pace == pytest.approx(4 * 100 / 3000)
    assert paced.requests == 3000 and paced.users == 100 and paced.duration is None
    assert "spread over at least 4 s" in line and "at most 750 req/s" in line
    # the fault's end: a stall's duration, a repeating kill's second time
    stall, _ = paced_for(load, Fault.parse("stall-broker@2+3")) or (None, "")
    assert stall is not None and stall.pace == pytest.approx(10 * 100 / 3000)
    again, _ = paced_for(load, Fault.parse("kill-worker@2/2")) or (None, "")
    assert again is not None and again.pace == pytest.approx(8 * 100 / 3000)


@pytest.mark.parametrize("load", [
    LoadSpec(users=100, requests=3000, duration=10),  # its own length
    LoadSpec(users=100, requests=3000, pace=0.5),  # its own pace
    LoadSpec(model="open", rate=100, requests=3000),  # its own rate
    LoadSpec(users=10, duration=5),  # no count
])
def test_a_load_with_its_own_length_or_rate_is_not_paced(load: LoadSpec) -> None:
    assert paced_for(load, Fault.parse("kill-worker@2")) is None
    assert paced_for(LoadSpec(users=100, requests=3000), None) is None


def test_recovery_is_the_gap_until_half_the_earlier_rate() -> None:
    before = _steady(0.0, 10.0, 100)
    # nothing for 1 s after the fault at 10 s, a trickle (10/s, below half), nothing, then 100/s again
    events = before + _steady(11.0, 12.0, 10) + _steady(13.0, 20.0, 100)
    assert recovery(events, 10.0) == pytest.approx(3.0, abs=0.02)
    # back at 60/s: half of 100/s is enough
    assert recovery(before + _steady(10.5, 20.0, 60), 10.0) == pytest.approx(0.5, abs=0.02)
    assert recovery(before, 10.0) is None  # never came back
    assert recovery(_steady(0.0, 20.0, 100), 10.0) == pytest.approx(0.0, abs=0.02)
    assert recovery(_steady(10.0, 20.0, 100), 10.0) is None  # no earlier rate to recover to
    assert recovery([], 10.0) is None


def _wait_for_lines(log: Path, count: int) -> None:
    wait_until(lambda: log.is_file() and log.read_text().split().count("up") >= count, 30,
               what=f"{log}: {count} start(s)")


def test_kill_then_restart_replaces_the_whole_group(tmp_path: Path) -> None:
    # a parent with a child in its process group, as a worker with a pool
    code = ("import subprocess, sys, time; subprocess.Popen([sys.executable, '-c', 'import time; "
            "time.sleep(300)']); print('up', flush=True); time.sleep(300)")
    with ProcessSet({}, stop_timeout=5) as procs:
        first = procs.start("worker-0", [sys.executable, "-c", code], tmp_path / "w.log")
        _wait_for_lines(tmp_path / "w.log", 1)
        tree = [psutil.Process(first.pid), *psutil.Process(first.pid).children()]
        pid, code_at_kill = procs.kill("worker-0")
        assert pid == first.pid and code_at_kill == -9
        _, alive = psutil.wait_procs(tree, timeout=5)
        assert not alive, "SIGKILL reaches the whole group"
        second = procs.restart("worker-0")
        assert second.pid != first.pid and second.alive()
        assert [p.name for p in procs.procs] == ["worker-0"]
        _wait_for_lines(tmp_path / "w.log", 2)
        started = [psutil.Process(second.pid), *psutil.Process(second.pid).children()]
    _, alive = psutil.wait_procs(started, timeout=5)
    assert not alive
    assert (tmp_path / "w.log").read_text().split().count("up") == 2, "the log is appended, not replaced"
    with pytest.raises(RuntimeError, match="stopping"):
        procs.restart("worker-0")


def _run(args: list[str]) -> tuple[int, str, list[psutil.Process]]:
    started: dict[int, psutil.Process] = {}
    with harness_cli(args) as proc:
        assert proc.stdout is not None
        lines = []
        for line in proc.stdout:
            lines.append(line)
            with contextlib.suppress(psutil.NoSuchProcess):
                started.update((p.pid, p) for p in psutil.Process(proc.pid).children(recursive=True))
        proc.wait(timeout=60)
    return proc.returncode, "".join(lines), list(started.values())


@pytest.mark.slow
def test_killed_worker_is_restarted_and_nothing_is_lost(redis_url: str, out_dir: Path) -> None:
    code, out, started = _run(
        # 300 req/s, above what the worker runs: it holds its concurrency at the kill, with a backlog behind
        ["run", "--backends", "arq", "--redis-url", redis_url, "--output", str(out_dir), "--users", "10",
         "--rate", "300", "--duration", "5", "--warmup", "20", "--task-timeout", "3", "--fault", "kill-worker@2"])
    result = json.loads(next(out_dir.glob("*/result.json")).read_text())
    case = result["cases"][0]
    fault = case["fault"]
    assert fault["injected"] and fault["killed_exit_code"] == -9, fault
    assert fault["restarted_pid"] != fault["killed_pid"]
    assert fault["ready_after_s"] > 0 and fault["executing_again_s"] is not None, fault
    assert case["summary"]["lost"] == 0, case["summary"]  # at-least-once: retried, maybe twice
    assert case["summary"]["executing_again_s"] == fault["executing_again_s"]
    # at-least-once promises no single execution: a duplicate is inside its bound ("duplicates allowed"),
    # shown with the bound, not a failure (issue 34)
    assert case["status"] == "ok" and code == 0, out
    assert len(case["fault"]["within_bounds"]) == bool(case["summary"]["duplicated"]), case["fault"]
    assert "fault kill-worker@2: worker-0" in out and "restarted and ready after" in out
    _, alive = psutil.wait_procs(started, timeout=10)
    assert not alive, [p.pid for p in alive]


@pytest.mark.slow
def test_killed_api_loses_what_background_tasks_held(redis_url: str, out_dir: Path) -> None:
    # each task waits 1 s in the API after its 2xx: at the kill, the last second's tasks die with it;
    # the drain outlasts the restarted API's last tasks (1 s) and no more: the lost ones never come
    code, out, started = _run(
        ["run", "--backends", "background", "--redis-url", redis_url, "--output", str(out_dir),
         "--users", "10", "--duration", "3", "--warmup", "0", "--io-delay", "1", "--drain-timeout", "3",
         "--fault", "kill-api@1.5"])
    case = json.loads(next(out_dir.glob("*/result.json")).read_text())["cases"][0]
    assert case["fault"]["injected"] and case["fault"]["target"] == "api"
    assert case["summary"]["lost"] > 0, case["summary"]
    # background tasks promise nothing once the 202 left: the loss is the case's figure, not a failure
    assert case["fault"]["promise"]["keeps_accepted"] is False
    # inside the bound "nothing is promised": ok but for the requests the dead API failed
    assert case["status"] == ("errors" if case["summary"]["errors_pct"] else "ok") and code == 0, out
    assert any("lost: within the bound" in line for line in case["fault"]["within_bounds"]), case["fault"]
    assert "fault kill-api@1.5: api" in out
    _, alive = psutil.wait_procs(started, timeout=10)
    assert not alive, [p.pid for p in alive]


def test_a_worker_fault_on_a_backend_without_workers_is_reported(redis_url: str, out_dir: Path) -> None:
    code, out, _ = _run(
        ["run", "--backends", "background", "--redis-url", redis_url, "--output", str(out_dir),
         "--requests", "200", "--users", "5", "--warmup", "0", "--fault", "kill-worker@1"])
    case = json.loads(next(out_dir.glob("*/result.json")).read_text())["cases"][0]
    assert case["fault"]["injected"] is False
    assert "no worker process to kill" in out
    assert code == 0 and case["summary"]["lost"] == 0


@pytest.mark.slow
def test_interrupt_after_a_fault_leaves_no_process(redis_url: str, out_dir: Path) -> None:
    started: dict[int, psutil.Process] = {}
    with harness_cli(["run", "--backends", "arq", "--redis-url", redis_url, "--output", str(out_dir),
                      "--users", "5", "--duration", "60", "--warmup", "0", "--fault", "kill-worker@1"]) as proc:
        assert proc.stdout is not None
        for line in proc.stdout:
            if "load:" in line:
                break
        workers: set[int] = set()

        def successor_up() -> bool:
            for child in psutil.Process(proc.pid).children(recursive=True):
                started[child.pid] = child
                with contextlib.suppress(psutil.Error):
                    if child.cmdline()[-1:] == ["worker"]:
                        workers.add(child.pid)
            return len(workers) >= 2

        wait_until(successor_up, 60, what="the killed worker's successor", interval=0.1)
        assert len(workers) == 2, workers
        proc.send_signal(2)  # SIGINT
        proc.communicate(timeout=60)
    assert proc.returncode == 130
    _, alive = psutil.wait_procs(list(started.values()), timeout=10)
    assert not alive, [p.pid for p in alive]


@pytest.mark.slow
def test_a_fault_due_after_a_short_load_hits_the_backlog_in_the_drain(out_dir: Path) -> None:
    # 300 requests in a second (a load of its own length: not paced to the fault); 300 tasks of 40 ms
    # at concurrency 2 take about 6 s to run: the broker's restart at 2 s comes while the backlog is on
    # it (AOF fsync always: kept)
    code, out, started = _run(
        ["run", "--backends", "saq", "--output", str(out_dir), "--model", "open", "--rate", "300",
         "--duration", "1", "--users", "10", "--warmup", "0", "--io-delay", "0.04", "--concurrency", "2", "--fault", "restart-broker@2",
         "--option", "saq.retries=3"])  # at-least-once (SAQ's default, 1, re-runs nothing)
    case = json.loads(next(out_dir.glob("*/result.json")).read_text())["cases"][0]
    fault, load = case["fault"], case["load"]
    assert fault["injected"] and fault["during_drain"], fault
    assert fault["at"] - fault["load_start"] >= 2.0 > load["elapsed_s"], (fault, load["elapsed_s"])
    assert fault["restarted_pid"] != fault["killed_pid"], fault
    assert case["summary"]["lost"] == 0 and code == 0, out
    assert "during the drain (the load had ended)" in out
    _, alive = psutil.wait_procs(started, timeout=10)
    assert not alive, [p.pid for p in alive]


def test_a_fault_due_after_the_whole_run_fails_the_case(redis_url: str, out_dir: Path) -> None:
    code, out, _ = _run(
        ["run", "--backends", "arq", "--redis-url", redis_url, "--output", str(out_dir), "--requests", "50",
         "--duration", "1", "--users", "5", "--warmup", "0", "--fault", "kill-worker@60"])
    case = json.loads(next(out_dir.glob("*/result.json")).read_text())["cases"][0]
    assert case["fault"]["injected"] is False and case["summary"]["lost"] == 0
    assert "before the fault was due at 60 s: nothing was injected" in case["fault"]["note"]
    assert case["status"] == "failed" and code == 1, out
