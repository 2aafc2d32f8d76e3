"""The task processes' memory: a forking worker's shared pages are counted once, not once per child."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from taskbench.harness.processes.rss import MB, RssSampler, tree_rss

#: a parent that touches 64 MiB, then forks 4 children that keep those pages shared and sleep
FORKER = """
import os, sys, time
block = bytearray(64 * 1024 * 1024)
for i in range(0, len(block), 4096):
    block[i] = 1
for _ in range(4):
    if os.fork() == 0:
        time.sleep(60)
        os._exit(0)
print("ready", flush=True)
time.sleep(60)
"""


@pytest.mark.skipif(not Path("/proc/self/smaps_rollup").exists(), reason="no /proc/<pid>/smaps_rollup (Linux >= 4.14)")
def test_pages_shared_with_forked_children_count_once() -> None:
    proc = subprocess.Popen([sys.executable, "-c", FORKER], stdout=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        total = tree_rss([proc.pid]) / MB
        # five processes share the 64 MiB: summed RSS would be about 5 x 64 = 320 MiB
        assert 64 <= total < 160, total
        sampler = RssSampler(lambda: {"forker": proc.pid}, interval=0.05).start()
        time.sleep(0.3)
        record = sampler.stop()
        assert record is not None and record.processes == ["forker"]
        assert 64 <= record.peak_mb < 160, record
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()


def test_a_pid_that_is_gone_counts_nothing() -> None:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    assert tree_rss([proc.pid]) == 0
