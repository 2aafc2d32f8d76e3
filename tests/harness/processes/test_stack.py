"""The one process lifecycle: start, wait until ready (or say why not), limit, measure CPU, stop everything."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import psutil
import pytest

from taskbench.harness import HarnessError
from taskbench.harness.processes.cgroups import Limit
from taskbench.harness.processes.stack import Stack

SLEEP = [sys.executable, "-c", "import time; time.sleep(60)"]
BUSY = [sys.executable, "-c", "import time\nend = time.monotonic() + 60\nwhile time.monotonic() < end: pass"]


def test_wait_ready_names_the_process_that_died(tmp_path: Path) -> None:
    with Stack(dict(os.environ), name="t-died") as stack:
        stack.start("api", [sys.executable, "-c", "print('boom'); raise SystemExit(3)"], tmp_path / "api.log")
        with pytest.raises(HarnessError, match=r"api exited with code 3 during start-up; its log .* ends:\nboom"):
            stack.wait_ready(lambda: False, timeout=30, what="the API")


def test_wait_ready_says_what_it_waited_for(tmp_path: Path) -> None:
    with Stack(dict(os.environ), name="t-timeout") as stack:
        stack.start("api", SLEEP, tmp_path / "api.log")
        with pytest.raises(HarnessError, match=r"timed out after 0\.2 s waiting for the API to answer"):
            stack.wait_ready(lambda: False, timeout=0.2, what="the API to answer")


def test_leaving_the_block_stops_every_process_and_its_children(tmp_path: Path) -> None:
    parent = [sys.executable, "-c", "import subprocess, sys, time; subprocess.Popen([sys.executable, '-c', "
              "'import time; time.sleep(60)']); time.sleep(60)"]
    with Stack(dict(os.environ), name="t-stop", stop_timeout=5) as stack:
        proc = stack.start("worker-0", parent, tmp_path / "w.log", role="workers")
        stack.wait_ready(lambda: psutil.Process(proc.pid).children(), timeout=30, what="the child")
        tree = [psutil.Process(proc.pid), *psutil.Process(proc.pid).children(recursive=True)]
    _, alive = psutil.wait_procs(tree, timeout=5)
    assert not alive
    assert stack.exit_codes["worker-0"] == -15


def test_limits_apply_by_role_and_the_cpu_used_under_load_is_measured(tmp_path: Path,
                                                                       cgroups_writable: str | None) -> None:
    with Stack(dict(os.environ), name="t-limit", stop_timeout=5) as stack:
        stack.start("api", BUSY, tmp_path / "api.log", role="api")
        stack.start("worker-0", SLEEP, tmp_path / "w.log", role="workers")
        records = stack.limit({"api": Limit(cpu=0.3)})
        assert set(records) == {"api"}, "only the roles with a limit"
        with stack.measure() as window:
            psutil.Process(stack.get("api").pid).cpu_percent(interval=1.0)
        records = stack.limit_records()
    assert window.seconds >= 1.0
    share = window.cpu_share["api"]
    assert records["api"].load_cpu == share
    assert records["api"].stats.cpu_s is not None and records["api"].stats.wall_s
    if cgroups_writable is None:
        assert records["api"].applied and records["api"].method in ("cgroup-v1", "cgroup-v2")
        assert share < 0.5, f"a busy loop under a 0.3 CPU limit used {share:.2f} of a CPU"
    else:
        assert not records["api"].applied and records["api"].notes, "an unapplied limit says why"


def test_a_measured_stretch_counts_each_component_s_processes(tmp_path: Path) -> None:
    """A parent that starts three children (one with a child of its own) while the stretch runs counts five:
    itself and every descendant; a component of one process counts one; children that came and went
    before the stretch ended still count (the most seen, not the last)."""
    forks = [sys.executable, "-c",
             "import subprocess, sys, time\n"
             "time.sleep(0.3)\n"
             "kids = [subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)']) for _ in range(2)]\n"
             "kids.append(subprocess.Popen([sys.executable, '-c', 'import subprocess, sys, time; "
             "subprocess.Popen([sys.executable, \"-c\", \"import time; time.sleep(60)\"]); time.sleep(60)']))\n"
             "time.sleep(2.5)\n"
             "for kid in kids: kid.kill(); kid.wait()\n"
             "time.sleep(60)"]
    with Stack(dict(os.environ), name="t-count", stop_timeout=5) as stack:
        server = stack.start("server", forks, tmp_path / "s.log")
        stack.start("worker-0", SLEEP, tmp_path / "w.log")
        with stack.measure() as window:
            wait_for = psutil.Process(server.pid)
            stack.wait_ready(lambda: len(wait_for.children(recursive=True)) >= 4, timeout=30, what="the forks")
            stack.wait_ready(lambda: not wait_for.children(), timeout=30, what="the forks to end")
    assert window.processes == {"server": 5, "worker-0": 1}


def test_an_interrupt_as_the_measured_block_starts_is_an_interrupt(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """Ctrl-C arriving while the process counter starts propagates as KeyboardInterrupt (the CLI's exit 130),
    not as an error of the measurement's own clean-up (it was an UnboundLocalError: exit 1)."""
    from taskbench.harness.processes.peaks import Peaks

    def interrupted(self: Peaks) -> Peaks:
        raise KeyboardInterrupt

    monkeypatch.setattr(Peaks, "__enter__", interrupted)
    with Stack(dict(os.environ), name="t-interrupt", stop_timeout=5) as stack:
        stack.start("worker-0", SLEEP, tmp_path / "w.log")
        with pytest.raises(KeyboardInterrupt), stack.measure():
            pass
