"""Process hygiene: own groups, SIGTERM then SIGKILL, nothing left behind."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import psutil

from taskbench.harness.processes import ProcessSet
from taskbench.wait import wait_until

STUBBORN = """
import signal, subprocess, sys, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)
child = subprocess.Popen([sys.executable, "-c", "import signal,time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(300)"])
print(child.pid, flush=True)
time.sleep(300)
"""


def test_sigkill_after_timeout_reaches_grandchildren(tmp_path: Path) -> None:
    with ProcessSet(dict(os.environ), stop_timeout=0.5) as procs:
        proc = procs.start("stubborn", [sys.executable, "-c", STUBBORN], tmp_path / "s.log")
        assert os.getpgid(proc.pid) == proc.pid  # its own process group
        text = wait_until(lambda: proc.log_path.read_text().strip(), 30, what="the grandchild's pid")
        grandchild = int(str(text))
        assert psutil.pid_exists(grandchild)
    assert procs.exit_codes["stubborn"] == -9
    _, alive = psutil.wait_procs([psutil.Process(grandchild)] if psutil.pid_exists(grandchild) else [],
                                    timeout=5)
    assert not alive


def test_polite_process_gets_sigterm(tmp_path: Path) -> None:
    with ProcessSet(dict(os.environ), stop_timeout=10) as procs:
        procs.start("sleeper", [sys.executable, "-c", "import time; time.sleep(300)"], tmp_path / "p.log")
    assert procs.exit_codes["sleeper"] == -15
