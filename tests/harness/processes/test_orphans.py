"""A harness that dies takes its processes with it; the next run finds what a dead run left, and names a live one."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from taskbench.harness.processes.runs import RunRecord, leftovers, registered, start_ticks
from taskbench.procgroup import OWNER_ENV
from taskbench.results import load
from taskbench.wait import wait_until

ROOT = Path(__file__).resolve().parents[3]

HARNESS = """
import os, sys, time
from pathlib import Path
from taskbench.procgroup import Managed, reaper_pid
proc = Managed(name="server", log_path=Path(sys.argv[1]), argv=[sys.executable, "-c",
    "import subprocess, sys, time; subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(300)']); "
    "time.sleep(300)"])
proc.start(dict(os.environ))
print(proc.pid, reaper_pid(), flush=True)
time.sleep(300)
"""


def _gone(procs: list[psutil.Process]) -> list[psutil.Process]:
    """Those of ``procs`` still running (a zombie has exited; a pid taken again is another process)."""
    alive = []
    for proc in procs:
        try:
            if proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE:
                alive.append(proc)
        except psutil.NoSuchProcess:
            continue
    return alive


def test_a_killed_starter_takes_its_groups_with_it(tmp_path: Path) -> None:
    starter = subprocess.Popen([sys.executable, "-c", HARNESS, str(tmp_path / "server.log")], stdout=subprocess.PIPE,
                               text=True, start_new_session=True)
    try:
        assert starter.stdout is not None
        leader, reaper = (int(x) for x in starter.stdout.readline().split())
        group = wait_until(lambda: [psutil.Process(p) for p in _members(leader)] if len(_members(leader)) == 2
                           else None, 30, what="the server and its child")
        assert group is not None
        starter.kill()  # SIGKILL: no stop path runs
        starter.wait()
        procs = [*group, psutil.Process(reaper)]
        wait_until(lambda: not _gone(procs), 5, what="the server's group and the reaper to exit")
    finally:
        starter.kill()
        starter.wait()
        if starter.stdout is not None:
            starter.stdout.close()


POSTGRES = """
import os, sys, time
from pathlib import Path
from taskbench.harness.brokers.postgres import PrivatePostgres
server = PrivatePostgres(Path(sys.argv[1]))
server.start(dict(os.environ))
print(" ".join(str(pid) for pid in server.members()), flush=True)
time.sleep(300)
"""


@pytest.mark.slow
def test_a_killed_starter_takes_its_private_postgresql_with_it(tmp_path: Path) -> None:
    # the postmaster's children call setsid(): out of its group, they go when they see it gone
    starter = subprocess.Popen([sys.executable, "-c", POSTGRES, str(tmp_path / "pg")], stdout=subprocess.PIPE,
                               text=True, start_new_session=True)
    procs: list[psutil.Process] = []
    try:
        assert starter.stdout is not None
        procs = [psutil.Process(int(pid)) for pid in starter.stdout.readline().split()]
        assert len(procs) > 1, "the postmaster and its children"
        starter.kill()
        starter.wait()
        wait_until(lambda: not _gone(procs), 5, what="the private PostgreSQL's processes to exit")
    finally:
        starter.kill()
        starter.wait()
        if starter.stdout is not None:
            starter.stdout.close()
        for proc in _gone(procs):
            proc.kill()


def _members(pgid: int) -> list[int]:
    found = []
    for proc in psutil.process_iter():
        try:
            if os.getpgid(proc.pid) == pgid:
                found.append(proc.pid)
        except (ProcessLookupError, PermissionError):
            continue
    return found


# -- a real run, killed or interrupted in its load ---------------------------------------------------------


def _start_run(tmp_path: Path, *extra: str) -> tuple[subprocess.Popen[str], Path]:
    """``./taskbench run`` on arq, until it is in its load phase; the process and its output folder."""
    out = tmp_path / "results"
    env = {**os.environ, "TASKBENCH_RUNS_DIR": str(tmp_path / "runs")}
    env.pop(OWNER_ENV, None)
    run = subprocess.Popen([str(ROOT / "taskbench"), "run", "--backends", "arq", "--users", "4", "--duration", "120",
                            "--io-delay", "0.01", "--warmup", "5", "--output", str(out), *extra],
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env,
                           start_new_session=True)
    assert run.stderr is not None
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        line = run.stderr.readline()
        if not line:
            break
        if "load: closed model" in line:
            break
    else:
        run.kill()
        pytest.fail("the run did not reach its load phase")

    wait_until(lambda: _driving(run.pid), 60, what="the load driver to start")
    return run, out


def _driving(pid: int) -> bool:
    """Whether the harness ``pid`` has a load driver process running."""
    for child in psutil.Process(pid).children():
        try:
            if "spawn_main" in " ".join(child.cmdline()) and child.status() != psutil.STATUS_ZOMBIE:
                return True
        except psutil.Error:
            continue
    return False


def _processes_of(run: subprocess.Popen[str], tmp_path: Path) -> list[psutil.Process]:
    """Every process of the run: the harness's descendants and whatever carries its marker."""
    record = json.loads((tmp_path / "runs" / f"{run.pid}.json").read_text())
    marked = leftovers(RunRecord(**record).marker)
    found = {p.pid: p for p in psutil.Process(run.pid).children(recursive=True)}
    for pid in marked:
        found.setdefault(pid, psutil.Process(pid))
    return list(found.values())


@pytest.fixture
def no_stray() -> Iterator[list[psutil.Process]]:
    """The processes a test's run started (the harness first), SIGKILLed at the end if any is still there."""
    procs: list[psutil.Process] = []
    yield procs
    for proc in _gone(procs):
        proc.kill()


@pytest.mark.slow
def test_a_run_killed_in_its_load_leaves_no_process(tmp_path: Path, no_stray: list[psutil.Process]) -> None:
    run, _ = _start_run(tmp_path)
    procs = _processes_of(run, tmp_path)
    no_stray.extend([psutil.Process(run.pid), *procs])
    lines = [" ".join(p.cmdline()) for p in procs]
    for kind in ("redis-server", "taskbench serve", "taskbench worker", "spawn_main", "resource_tracker",
                 "taskbench.procgroup"):
        assert any(kind in line for line in lines), (kind, lines)
    assert sum("redis-server" in line for line in lines) == 2  # the ledger's and the broker's
    run.kill()
    run.communicate(timeout=30)
    # the reaper stops them once the harness is gone: waited for, a busy machine takes its time
    wait_until(lambda: not _gone(procs), 60, interval=0.2, raise_on_timeout=False)
    assert not _gone(procs), [" ".join(p.cmdline()) for p in _gone(procs)]


@pytest.mark.slow
def test_an_interrupted_run_writes_what_it_measured(tmp_path: Path, no_stray: list[psutil.Process]) -> None:
    run, out = _start_run(tmp_path, "--duration", "4", "--io-delay", "0.2", "--concurrency", "1")
    no_stray.extend([psutil.Process(run.pid), *_processes_of(run, tmp_path)])
    # SIGTERM in the drain: the load is measured, the audit not. The drain begins once the harness holds the
    # load's figures and says "draining" inside the drain's phase (the driver's exit alone came before both)
    assert run.stderr is not None
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        line = run.stderr.readline()
        if not line or "draining" in line:
            break
    run.send_signal(signal.SIGTERM)
    _, err = run.communicate(timeout=120)
    assert run.returncode == 130, err
    (path,) = out.glob("*/result.json")
    result = load(path)
    assert result.interrupted is not None and result.interrupted.startswith("interrupted during [arq] ")
    assert not result.passed()
    (case,) = result.cases
    assert case.status == "failed" and result.interrupted in case.failures
    assert case.load is not None and case.load.ok > 0  # the load it measured
    wait_until(lambda: not _gone(no_stray[1:]), 5, what="every process of the run to exit")
    shown = subprocess.run([str(ROOT / "taskbench"), "report", str(path)], capture_output=True, text=True,
                           timeout=120, check=False)
    assert "interrupted during [arq]" in shown.stdout + shown.stderr


# -- the record of runs --------------------------------------------------------------------------------------


@pytest.fixture
def runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "runs"
    folder.mkdir()
    monkeypatch.setenv("TASKBENCH_RUNS_DIR", str(folder))
    monkeypatch.delenv(OWNER_ENV, raising=False)
    return folder


def _record(folder: Path, pid: int, ticks: int | None, token: str = "t0ken") -> RunRecord:
    record = RunRecord(pid=pid, ticks=ticks, token=token, output="/somewhere/results", command="taskbench run",
                       started="2026-01-01T00:00:00+00:00")
    (folder / f"{pid}.json").write_text(json.dumps(record.__dict__))
    return record


def test_a_run_stops_what_a_dead_run_left_by_pid(runs: Path, tmp_path: Path) -> None:
    dead = subprocess.Popen(["true"])
    dead.wait()
    record = _record(runs, dead.pid, 12345)  # a harness gone (a pid taken again would have other ticks)
    left = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"], start_new_session=True,
                            env={**os.environ, OWNER_ENV: record.marker})
    bystander = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"], start_new_session=True)
    try:
        wait_until(lambda: left.pid in leftovers(record.marker), 10, what="the leftover's environment")
        said: list[str] = []
        with registered(tmp_path / "out", said.append) as mine:
            assert os.environ[OWNER_ENV] == mine.marker
            assert (runs / f"{os.getpid()}.json").exists()
        assert left.wait(timeout=10) == -signal.SIGTERM
        assert bystander.poll() is None  # not the dead run's: untouched
        (line,) = said
        assert f"a taskbench run that died (pid {dead.pid}, output /somewhere/results" in line
        assert f"pid {left.pid} (" in line
        assert not (runs / f"{dead.pid}.json").exists() and not (runs / f"{os.getpid()}.json").exists()
        assert OWNER_ENV not in os.environ
    finally:
        for proc in (left, bystander):
            proc.kill()
            proc.wait()


def test_a_run_warns_of_a_live_one(runs: Path, tmp_path: Path) -> None:
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"], start_new_session=True)
    try:
        _record(runs, other.pid, wait_until(lambda: start_ticks(other.pid), 5, what="its start time"))
        said: list[str] = []
        with registered(tmp_path / "out", said.append):
            pass
        assert said == [f"warning: another taskbench run is running (pid {other.pid}, output /somewhere/results, "
                        "started 2026-01-01T00:00:00+00:00): both pin the same cores, so their measurements "
                        "interfere"]
        assert other.poll() is None and (runs / f"{other.pid}.json").exists()
    finally:
        other.kill()
        other.wait()


def test_a_scenario_nested_in_a_run_is_one_record(runs: Path, tmp_path: Path) -> None:
    with registered(tmp_path, lambda _: None) as outer, registered(tmp_path, lambda _: None) as inner:
        assert inner.marker == outer.marker
        assert [p.name for p in runs.iterdir()] == [f"{os.getpid()}.json"]
