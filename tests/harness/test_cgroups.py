"""Limits per component: real cgroups where writable (here: v1 as root), else a recorded fallback."""

from __future__ import annotations

import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from taskbench.harness.cgroups import Cgroups, Limit

BUSY = "import time, resource\nt = time.time()\nwhile time.time() - t < 2: pass\n" \
       "print(resource.getrusage(resource.RUSAGE_SELF).ru_utime)"


def test_limit_validation() -> None:
    assert Limit(cpu=0.2, memory_mb=200).describe() == "0.2 CPU / 200 MB"
    assert Limit().describe() == "none"
    with pytest.raises(ValueError, match="cpu limit"):
        Limit(cpu=0)
    with pytest.raises(ValueError, match="memory limit"):
        Limit(memory_mb=1)


def test_cpu_limit_throttles_a_busy_process() -> None:
    cgroups = Cgroups(f"test-{uuid.uuid4().hex[:8]}")
    proc = subprocess.Popen([sys.executable, "-c", BUSY], stdout=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        record = cgroups.apply("busy", [proc.pid], Limit(cpu=0.2, memory_mb=200))
        out, _ = proc.communicate(timeout=30)
        if not record["applied"]:
            assert record["notes"], "a limit not applied says why"
            assert record["method"] in ("pinning", "none")
            return
        assert record["method"].startswith("cgroup")
        assert float(out) < 1.2, "2 s of busy loop under 0.2 CPU used far less than 2 s of CPU"
        stats = cgroups.stats("busy")
        assert stats["nr_throttled"] > 0
    finally:
        proc.kill()
        proc.wait()
        cgroups.release()
    assert not any(Path(p).exists() for p in record["paths"]), "release() removes the groups"


def test_memory_limit_kills_an_oversized_process() -> None:
    cgroups = Cgroups(f"test-{uuid.uuid4().hex[:8]}")
    code = "import time\ntime.sleep(0.5)\nb = bytearray(300 * 1024 * 1024)\nprint('survived')"
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        record = cgroups.apply("big", [proc.pid], Limit(memory_mb=100))
        out, _ = proc.communicate(timeout=30)
        if record["applied"]:
            assert proc.returncode != 0
            assert "survived" not in out
            assert cgroups.stats("big").get("oom_kills", 1) >= 1
        else:
            assert record["notes"]
    finally:
        proc.kill()
        proc.wait()
        cgroups.release()
