"""SIGHUP (a closed terminal, a dropped ssh session) stops a run as Ctrl-C and SIGTERM do: every process
stopped, exit 130, and result.json marked interrupted with what was measured, its row holding the load's
figures even when the drain was cut before the audit."""

from __future__ import annotations

import json
import os
import pty
import select
import signal
import subprocess
import sys
from pathlib import Path

import psutil
import pytest

from taskbench.procgroup import OWNER_ENV
from taskbench.results import load
from taskbench.wait import wait_until

ROOT = Path(__file__).resolve().parents[2]
#: the line each phase's interrupt waits for: the load has begun; the drain has begun (said in its phase)
MARKERS = {"load": "load: closed model", "drain": "draining"}
EXTRA = {"load": ["--duration", "120", "--io-delay", "0.01"],
         "drain": ["--duration", "3", "--io-delay", "0.2", "--concurrency", "1"]}


class Run:
    """``./taskbench run`` on arq with its output on a terminal of its own (a pty) or on a pipe."""

    def __init__(self, tmp_path: Path, phase: str, *, terminal: bool) -> None:
        self.out = tmp_path / "results"
        env = {**os.environ, "TASKBENCH_RUNS_DIR": str(tmp_path / "runs"), "NO_COLOR": "1", "COLUMNS": "200"}
        env.pop(OWNER_ENV, None)
        argv = [str(ROOT / "taskbench"), "run", "--backends", "arq", "--users", "4", "--warmup", "5",
                "--output", str(self.out), *EXTRA[phase]]
        self.seen = b""
        if terminal:
            self.pid, self.fd = pty.fork()
            if self.pid == 0:  # the child: its controlling terminal is the pty; a closed master hangs it up
                os.execve(argv[0], argv, env)
            self.proc: subprocess.Popen[bytes] | None = None
        else:
            self.proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env,
                                         start_new_session=True)
            assert self.proc.stderr is not None
            self.pid, self.fd = self.proc.pid, self.proc.stderr.fileno()
        self.code: int | None = None

    def read_until(self, marker: str) -> None:
        def seen() -> bool:
            ready, _, _ = select.select([self.fd], [], [], 0.2)
            if ready:
                try:
                    chunk = os.read(self.fd, 65536)
                except OSError:
                    chunk = b""
                if not chunk:
                    raise AssertionError(f"the run ended before {marker!r}:\n{self.seen.decode(errors='replace')}")
                self.seen += chunk
            return marker.encode() in self.seen

        wait_until(seen, 240, what=f"the run to print {marker!r}")

    def processes(self) -> list[psutil.Process]:
        """The API, the worker, the Redis servers and the load driver: once they all run."""
        harness = psutil.Process(self.pid)

        def started() -> list[psutil.Process]:
            children = harness.children(recursive=True)
            return children if len(children) >= 5 else []

        found = wait_until(started, 60, what="the run's processes")
        assert found is not None
        return found

    def wait(self) -> int:
        def ended() -> bool:
            if self.proc is not None:  # its stderr read on, so a full pipe never holds its stop path
                while select.select([self.fd], [], [], 0)[0] and os.read(self.fd, 65536):
                    pass
                return self.proc.poll() is not None
            if self.code is None:
                done, status = os.waitpid(self.pid, os.WNOHANG)
                if done:
                    self.code = os.waitstatus_to_exitcode(status)
            return self.code is not None

        wait_until(ended, 180, interval=0.1, what="the run to stop")
        return self.proc.returncode if self.proc is not None else int(self.code or 0)

    def kill_if_running(self) -> None:
        with_pid = psutil.pid_exists(self.pid) and (self.proc is None or self.proc.poll() is None)
        if with_pid:
            os.kill(self.pid, signal.SIGKILL)
            self.wait()


@pytest.mark.slow
@pytest.mark.parametrize("phase", ["load", "drain"])
@pytest.mark.parametrize("how", ["kill -HUP", "closed terminal"])
def test_a_hangup_stops_the_run_and_writes_what_it_measured(tmp_path: Path, phase: str, how: str) -> None:
    run = Run(tmp_path, phase, terminal=how == "closed terminal")
    started: list[psutil.Process] = []
    try:
        run.read_until(MARKERS["load"])
        started = run.processes()
        if phase == "drain":
            run.read_until(MARKERS["drain"])
        if how == "closed terminal":
            os.close(run.fd)  # the kernel hangs the terminal up: SIGHUP to the run, its writes fail after
        else:
            os.kill(run.pid, signal.SIGHUP)
        assert run.wait() == 130
    finally:
        run.kill_if_running()
        if run.proc is not None and run.proc.stderr is not None:
            run.proc.stderr.close()
    _, alive = psutil.wait_procs(started, timeout=30)
    assert not alive, [p.cmdline() for p in alive]

    (path,) = run.out.glob("*/result.json")
    result = load(path)
    # "draining" is said inside the drain's phase; the load's line comes just before its phase opens
    assert result.interrupted in ((f"interrupted during [arq] {phase}",) if phase == "drain" else
                                  ("interrupted during [arq] load", "interrupted during the start"))
    (case,) = result.cases
    assert case.status == "failed" and case.failures == [result.interrupted]
    if phase == "drain":  # cut before the audit: the row has the load's figures, its 2xx as accepted
        assert case.load is not None and case.load.ok > 0
        assert case.summary.accepted == case.load.ok and case.summary.requests == case.load.requests
        assert case.summary.accepted_per_s is not None and case.summary.p95_ms is not None
        shown = subprocess.run([sys.executable, "-m", "taskbench", "report", str(path)], capture_output=True,
                               text=True, timeout=120, check=False, env={**os.environ, "COLUMNS": "200"})
        assert f"{case.summary.accepted_per_s:,.0f}" in shown.stdout and "None" not in shown.stdout, shown.stdout
    assert json.loads(path.read_text())["interrupted"] == result.interrupted
