"""``taskbench drain``: one worker's drain of no-op tasks, its row per ledger mode, and nothing left behind."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import psutil
import pytest
import redis

from taskbench.wait import wait_until
from tests.helpers import harness_cli

pytestmark = pytest.mark.slow


def test_steady_rate_is_the_rate_between_the_10_and_90_percent_marks() -> None:
    from taskbench.drain import _steady

    assert _steady({0.1: (10.0, 100), 0.9: (12.0, 900)}) == pytest.approx(400.0)
    assert _steady({0.1: (10.0, 100)}) is None, "a drain that never reached 90 % has no steady rate"
    assert _steady({0.1: (10.0, 1000), 0.9: (10.0, 1000)}) is None, "both marks in one poll: no interval"


def test_worker_cpu_per_task_is_the_cpu_between_the_marks_over_the_tasks_between_them() -> None:
    from taskbench.drain import _cpu_per_task

    marks = {0.1: (10.0, 100), 0.9: (12.0, 900)}
    assert _cpu_per_task(marks, {0.1: 3.0, 0.9: 3.4}) == pytest.approx(500.0), "0.4 s of CPU over 800 tasks"
    assert _cpu_per_task({0.1: (10.0, 100)}, {0.1: 3.0}) is None, "a drain that never reached 90 %"
    assert _cpu_per_task(marks, {0.1: 3.4, 0.9: 3.0}) is None, "the worker was replaced between the marks"


def test_drain_pin_names_a_bad_core_in_one_line(tmp_path: Path) -> None:
    out = subprocess.run([sys.executable, "-m", "taskbench", "drain", "--backends", "arq", "--pin", "workers=999",
                          "--output", str(tmp_path)], capture_output=True, text=True, timeout=60, check=False)
    assert out.returncode == 2, out.stdout + out.stderr
    assert "workers cores [999] not in usable cores" in out.stderr and "Traceback" not in out.stderr


def test_drain_measures_each_ledger_mode_and_cleans_up(redis_url: str, tmp_path: Path) -> None:
    before = {p.pid for p in psutil.Process().children(recursive=True)}
    client = redis.Redis.from_url(redis_url)
    patterns = ("taskbench:drain-*", "arq:*:drain-*")
    keys_before = {k for pattern in patterns for k in client.scan_iter(match=pattern, count=1000)}
    out = subprocess.run([sys.executable, "-m", "taskbench", "drain", "--backends", "arq", "--tasks", "200",
                          "--ledger", "both", "--redis-url", redis_url, "--output", str(tmp_path),
                          "--format", "json", "--repeat", "2"],
                         capture_output=True, text=True, timeout=300, check=False)
    assert out.returncode == 0, out.stdout + out.stderr
    (path,) = tmp_path.glob("drain-*/drain.json")
    rows = json.loads(path.read_text())
    assert [(r["backend"], r["round"], r["ledger"], r["executed"], r["workload"]) for r in rows] == [
        ("arq", 0, True, 200, "io/simple"), ("arq", 0, False, 200, "io/simple"),
        ("arq", 1, False, 200, "io/simple"), ("arq", 1, True, 200, "io/simple")], "the modes alternate"
    printed = json.loads(out.stdout)
    entry = printed["backends"]["arq"]
    rate = [r["steady_per_s"] or r["drain_per_s"] for r in rows]  # the steady rate where there is one
    on = (rate[0] + rate[3]) / 2  # the median of two
    off = (rate[1] + rate[2]) / 2
    assert entry["on"] == pytest.approx(on) and entry["off"] == pytest.approx(off)
    assert entry["ratio"] == pytest.approx(on / off)
    cpu = [r["worker_cpu_us_per_task"] for r in rows]
    assert all(c is not None and c > 0 for c in cpu), cpu
    cpu_on, cpu_off = (cpu[0] + cpu[3]) / 2, (cpu[1] + cpu[2]) / 2
    assert entry["cpu_on_us_per_task"] == pytest.approx(cpu_on)
    assert entry["cpu_ratio"] == pytest.approx(cpu_off / cpu_on)
    assert all(r["drain_per_s"] > 0 and r["version"] for r in rows)
    assert all(r["steady_per_s"] is None or r["steady_per_s"] > 0 for r in rows)
    assert list(tmp_path.glob("drain-*/drain-case-arq-*.log")), "each drain-case process has its log"
    usable = sorted(os.sched_getaffinity(0))
    alone = usable[:1] if len(usable) > 1 else usable  # --pin auto: the worker alone on the first core
    assert all(r["worker_cpus"] == alone for r in rows), [r["worker_cpus"] for r in rows]
    if len(usable) > 1:
        assert printed["placement"] == {"api": None, "workers": usable[:1], "driver": usable[1:],
                                        "redis": usable[1:]}
    try:
        keys_after = {k for pattern in patterns for k in client.scan_iter(match=pattern, count=1000)}
        assert keys_after <= keys_before, "the drain deleted every key it made"
    finally:
        client.close()
    assert {p.pid for p in psutil.Process().children(recursive=True)} <= before, "no process left"


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_drain_stopped_by_a_signal_leaves_no_process(sig: signal.Signals, tmp_path: Path) -> None:
    """The embedded Redis servers, the drain-case process and the worker it started all stop with it."""
    with harness_cli(["drain", "--backends", "arq", "--tasks", "20000", "--ledger", "on",
                      "--output", str(tmp_path)]) as proc:
        harness = psutil.Process(proc.pid)

        def draining() -> list[psutil.Process]:
            tree = harness.children(recursive=True)
            names = " ".join(" ".join(p.cmdline()) for p in tree)
            # two Redis servers (ledger, broker), the drain-case process, and its worker
            return tree if "redis-server" in names and "taskbench worker" in names and len(tree) >= 4 else []

        started = wait_until(draining, 120, interval=0.2, what="the drain's worker")
        assert started is not None
        os.kill(proc.pid, sig)
        out, _ = proc.communicate(timeout=90)
    _, alive = psutil.wait_procs(started, timeout=10)
    assert not alive, [p.cmdline() for p in alive]
    assert proc.returncode == 130, out
    assert "interrupted; every process it started was stopped" in out and "Traceback" not in out, out
