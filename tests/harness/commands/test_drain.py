"""``taskbench drain``: one worker's drain of no-op tasks, its row per ledger mode, and nothing left behind."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import statistics
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest
import redis

from taskbench.wait import wait_until
from tests.helpers import harness_cli

pytestmark = pytest.mark.slow


def test_steady_rate_is_the_rate_between_the_10_and_90_percent_marks() -> None:
    from taskbench.drain_case import _steady

    assert _steady({0.1: (10.0, 100), 0.9: (12.0, 900)}) == pytest.approx(400.0)
    assert _steady({0.1: (10.0, 100)}) is None, "a drain that never reached 90 % has no steady rate"
    assert _steady({0.1: (10.0, 1000), 0.9: (10.0, 1000)}) is None, "both marks in one poll: no interval"


def test_worker_cpu_per_task_is_the_cpu_between_the_marks_over_the_tasks_between_them() -> None:
    from taskbench.drain_case import _cpu_per_task

    marks = {0.1: (10.0, 100), 0.9: (12.0, 900)}
    assert _cpu_per_task(marks, {0.1: 3.0, 0.9: 3.4}) == pytest.approx(500.0), "0.4 s of CPU over 800 tasks"
    assert _cpu_per_task({0.1: (10.0, 100)}, {0.1: 3.0}) is None, "a drain that never reached 90 %"
    assert _cpu_per_task(marks, {0.1: 3.4, 0.9: 3.0}) is None, "the worker was replaced between the marks"


def test_a_mark_is_a_share_of_the_tasks_or_of_the_rounds_seconds_whichever_comes_first() -> None:
    from taskbench.drain_case import _reached

    assert _reached(0.1, 100, 1000, 0.5, 60.0), "10 % of the tasks ran"
    assert not _reached(0.1, 99, 1000, 5.9, 60.0), "neither share yet"
    assert _reached(0.1, 5, 1000, 6.0, 60.0), "10 % of the seconds passed: a slow backend gets its marks"
    assert not _reached(0.9, 0, 1000, 60.0, 60.0), "a drain that ran nothing has no mark"
    assert _reached(0.9, 300, 1000, 54.0, 60.0)


def test_paired_window_runs_from_both_at_10_percent_to_the_first_at_90() -> None:
    from taskbench.drain_case import _window, _window_rates

    first = (1.0, 100, 20, 0.5, 0.4)
    both = (2.0, 300, 100, 0.9, 0.8)
    end = (4.0, 900, 500, 2.1, 2.0)
    assert _window({"first": first, "both": both, "end": end}) == (both, end)
    assert _window_rates((both, end), True) == (pytest.approx(300.0), pytest.approx(2000.0)), \
        "600 tasks in 2 s on 1.2 s of CPU"
    assert _window_rates((both, end), False) == (pytest.approx(200.0), pytest.approx(3000.0))
    late = (5.0, 1000, 100, 2.5, 2.1)
    assert _window({"first": first, "both": late, "end": end}) == (first, end), \
        "one reached 90 % before the other reached 10 %: from the first at 10 %"
    assert _window({"first": first, "both": both}) is None, "nobody reached 90 %"
    assert _window({"first": end, "both": end, "end": end}) is None, "all in one poll: no interval"
    assert _window_rates(None, True) == (None, None)


def test_ledger_cost_is_the_cpu_per_task_on_minus_off_and_the_median_of_paired_rounds() -> None:
    from taskbench.cli.measure import _ratio_line
    from taskbench.harness.commands.drain import ledger_ratios

    def row(ledger: bool, round_: int, rate: float, cpu: float | None, *, paired: bool) -> dict[str, object]:
        return {"backend": "arq", "ledger": ledger, "round": round_, "paired": paired, "steady_per_s": rate,
                "drain_per_s": rate, "worker_cpu_us_per_task": cpu, "version": "1", "workload": "noop"}

    alternating = ledger_ratios([row(True, 0, 90.0, 220.0, paired=False), row(False, 0, 100.0, 200.0, paired=False),
                                 row(False, 1, 100.0, 210.0, paired=False), row(True, 1, 90.0, 224.0, paired=False)])
    assert alternating["arq"]["ledger_us_per_task"] == pytest.approx(222.0 - 205.0), "median on - median off"
    paired = ledger_ratios([row(True, r, 95.0, on, paired=True) for r, on in enumerate((230.0, 212.0, 215.0))]
                           + [row(False, r, 100.0, off, paired=True) for r, off in enumerate((200.0, 205.0, None))])
    entry = paired["arq"]
    assert entry["ledger_us_rounds"] == [pytest.approx(30.0), pytest.approx(7.0), None]
    assert entry["ledger_us_per_task"] == pytest.approx(18.5), "the median of the rounds that have both"
    line = _ratio_line("arq", entry)
    assert "the ledger costs +18 µs of worker CPU a task, rounds +7 to +30" in line, line


def test_drain_method_is_checked_in_one_line(tmp_path: Path) -> None:
    for args, message in ((["--method", "sideways"], "--method must be paired or alternating, not 'sideways'"),
                          (["--method", "paired", "--ledger", "on"], "--method paired needs --ledger both")):
        out = subprocess.run([sys.executable, "-m", "taskbench", "drain", "--backends", "arq", *args,
                              "--output", str(tmp_path)], capture_output=True, text=True, timeout=60, check=False)
        assert out.returncode == 2, out.stdout + out.stderr
        assert message in out.stderr and "Traceback" not in out.stderr, out.stderr
    assert not list(tmp_path.iterdir()), "nothing was started"


def test_drain_pin_names_a_bad_core_in_one_line(tmp_path: Path) -> None:
    out = subprocess.run([sys.executable, "-m", "taskbench", "drain", "--backends", "arq", "--pin", "workers=999",
                          "--output", str(tmp_path)], capture_output=True, text=True, timeout=60, check=False)
    assert out.returncode == 2, out.stdout + out.stderr
    assert "workers cores [999] not in usable cores" in out.stderr and "Traceback" not in out.stderr


@contextlib.contextmanager
def _leaves_nothing_behind(redis_url: str) -> Iterator[None]:
    """The block's drain deletes every key it made (its run ids') and leaves no process running."""
    before = {p.pid for p in psutil.Process().children(recursive=True)}
    client = redis.Redis.from_url(redis_url)
    patterns = ("taskbench:drain-*", "arq:*:drain-*")
    try:
        keys_before = {k for pattern in patterns for k in client.scan_iter(match=pattern, count=1000)}
        yield
        keys_after = {k for pattern in patterns for k in client.scan_iter(match=pattern, count=1000)}
        assert keys_after <= keys_before, "the drain deleted every key it made"
    finally:
        client.close()
    assert {p.pid for p in psutil.Process().children(recursive=True)} <= before, "no process left"


def test_drain_measures_each_ledger_mode_and_cleans_up(redis_url: str, tmp_path: Path) -> None:
    with _leaves_nothing_behind(redis_url):
        out = subprocess.run([sys.executable, "-m", "taskbench", "drain", "--backends", "arq", "--tasks", "200",
                              "--ledger", "both", "--redis-url", redis_url, "--output", str(tmp_path),
                              "--format", "json", "--repeat", "2", "--method", "alternating"],
                             capture_output=True, text=True, timeout=300, check=False)
        assert out.returncode == 0, out.stdout + out.stderr
    (path,) = tmp_path.glob("drain-*/drain.json")
    rows = json.loads(path.read_text())
    assert [(r["backend"], r["round"], r["ledger"], r["executed"], r["workload"]) for r in rows] == [
        ("arq", 0, True, 200, "io/simple"), ("arq", 0, False, 200, "io/simple"),
        ("arq", 1, False, 200, "io/simple"), ("arq", 1, True, 200, "io/simple")], "the modes alternate"
    printed = json.loads(out.stdout)
    assert printed["method"] == "alternating"
    entry = printed["backends"]["arq"]
    assert entry["method"] == "alternating"
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


def test_paired_drain_runs_both_modes_at_once_and_takes_the_median_of_the_rounds_ratios(
        redis_url: str, tmp_path: Path) -> None:
    with _leaves_nothing_behind(redis_url):  # both runs' keys too
        out = subprocess.run([sys.executable, "-m", "taskbench", "drain", "--backends", "arq", "--tasks", "300",
                              "--redis-url", redis_url, "--output", str(tmp_path), "--format", "json",
                              "--repeat", "3"], capture_output=True, text=True, timeout=300, check=False)
        assert out.returncode == 0, out.stdout + out.stderr
    (path,) = tmp_path.glob("drain-*/drain.json")
    rows = json.loads(path.read_text())
    assert [(r["round"], r["ledger"], r["paired"], r["first"], r["executed"]) for r in rows] == [
        (0, True, True, True, 300), (0, False, True, False, 300), (1, True, True, False, 300),
        (1, False, True, True, 300), (2, True, True, True, 300), (2, False, True, False, 300)], \
        "a row per worker, ledger on first; the mode started first alternates"
    printed = json.loads(out.stdout)
    assert printed["method"] == "paired"
    entry = printed["backends"]["arq"]
    assert entry["method"] == "paired"
    for on, off in zip(rows[::2], rows[1::2], strict=True):
        assert on["window_s"] == off["window_s"], "both rates over the same seconds"
        assert on["worker_cpus"] == off["worker_cpus"], "side by side on the same cores"
    ratios = [on["steady_per_s"] / off["steady_per_s"] if on["steady_per_s"] is not None and off["steady_per_s"]
              else None for on, off in zip(rows[::2], rows[1::2], strict=True)]
    assert entry["ratio_rounds"] == [None if r is None else pytest.approx(r) for r in ratios]
    measured = [r for r in ratios if r is not None]
    assert measured, rows
    assert entry["ratio"] == pytest.approx(statistics.median(measured)), "the median of the rounds' ratios"
    assert list(tmp_path.glob("drain-*/drain-arq-ledger.log")), "the ledger-on worker's log"
    assert list(tmp_path.glob("drain-*/drain-arq-noledger.log")), "the ledger-off worker's log"


def test_a_round_ends_after_its_seconds_with_the_rate_of_what_ran(redis_url: str, tmp_path: Path) -> None:
    """arq runs ~200 no-op tasks a second here: 20,000 do not fit in a round of 6 s, which ends then
    (bounded in time), its rate taken between 10 % and 90 % of those seconds."""
    with _leaves_nothing_behind(redis_url):
        out = subprocess.run([sys.executable, "-m", "taskbench", "drain", "--backends", "arq", "--tasks", "20000",
                              "--round-seconds", "6", "--ledger", "on", "--workload", "noop",
                              "--redis-url", redis_url, "--output", str(tmp_path), "--format", "json"],
                             capture_output=True, text=True, timeout=300, check=False)
        assert out.returncode == 0, out.stdout + out.stderr
    (path,) = tmp_path.glob("drain-*/drain.json")
    (row,) = json.loads(path.read_text())
    assert row["seconds"] == 6.0
    assert 0 < row["executed"] < 20_000, row
    assert 6.0 <= row["drain_s"] < 6.0 + 5, "the round ended at its seconds, not at its tasks"
    assert row["steady_per_s"] > 0 and row["worker_cpu_us_per_task"] > 0, row
    assert json.loads(out.stdout)["backends"]["arq"]["on"] == pytest.approx(row["steady_per_s"])


@pytest.mark.parametrize(("sig", "ledger"), [(signal.SIGTERM, "on"), (signal.SIGINT, "both")])
def test_drain_stopped_by_a_signal_leaves_no_process(sig: signal.Signals, ledger: str, tmp_path: Path) -> None:
    """The embedded Redis servers, the drain-case process and the worker(s) it started all stop with it
    (``both``: a paired drain, two workers)."""
    workers = 2 if ledger == "both" else 1
    # 3,000 tasks: enqueued in a moment, and at arq's ~200 a second still draining when the signal comes
    with harness_cli(["drain", "--backends", "arq", "--tasks", "3000", "--ledger", ledger,
                      "--output", str(tmp_path)]) as proc:
        harness = psutil.Process(proc.pid)

        def draining() -> list[psutil.Process]:
            tree = harness.children(recursive=True)
            running = [" ".join(p.cmdline()) for p in tree]
            # two Redis servers (ledger, broker), the drain-case process, and its worker(s)
            started = sum("taskbench worker" in c for c in running) == workers
            return tree if started and any("redis-server" in c for c in running) and len(tree) >= 3 + workers else []

        started = wait_until(draining, 120, interval=0.2, what="the drain's worker")
        assert started is not None
        os.kill(proc.pid, sig)
        out, _ = proc.communicate(timeout=90)
    _, alive = psutil.wait_procs(started, timeout=10)
    assert not alive, [p.cmdline() for p in alive]
    assert proc.returncode == 130, out
    assert "interrupted; every process it started was stopped" in out and "Traceback" not in out, out
