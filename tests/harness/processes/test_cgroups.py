"""Limits per component: real cgroups where writable (skipped, with the reason, where not); the fallback."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from taskbench.harness.processes import cgroups as cgroups_module
from taskbench.harness.processes.cgroups import Cgroups, Limit

BUSY = "import time, resource\nt = time.time()\nwhile time.time() - t < 1: pass\n" \
       "print(resource.getrusage(resource.RUSAGE_SELF).ru_utime)"


def test_limit_validation() -> None:
    assert Limit(cpu=0.2, memory_mb=200).describe() == "0.2 CPU / 200 MB"
    assert Limit().describe() == "none"
    with pytest.raises(ValueError, match="cpu limit"):
        Limit(cpu=0)
    with pytest.raises(ValueError, match="memory limit"):
        Limit(memory_mb=1)


def test_unwritable_cgroups_fall_back_and_say_why(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Where no limit can be written, the run goes on: pinning for a CPU limit, and the record says why."""
    monkeypatch.setattr(cgroups_module, "ROOT", tmp_path / "no-cgroups")
    cgroups = Cgroups(f"test-{uuid.uuid4().hex[:8]}")
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"], start_new_session=True)
    try:
        record = cgroups.apply("busy", [proc.pid], Limit(cpu=0.2, memory_mb=200))
        assert record["applied"] is False
        assert any("cgroups not writable here" in note for note in record["notes"]), record
        if len(os.sched_getaffinity(0)) > 1:
            assert record["method"] == "pinning"
            assert len(os.sched_getaffinity(proc.pid)) == 1, "a CPU limit below one core pins to one core"
            assert "no memory limit applied" in record["notes"]
        else:
            assert record["method"] == "none"
        assert record["pids"] == [proc.pid]
        assert cgroups.stats("busy") == {}
    finally:
        proc.kill()
        proc.wait()
        cgroups.release()


def test_cpu_limit_throttles_a_busy_process(cgroups_writable: str | None) -> None:
    if cgroups_writable:
        pytest.skip(cgroups_writable)
    cgroups = Cgroups(f"test-{uuid.uuid4().hex[:8]}")
    proc = subprocess.Popen([sys.executable, "-c", BUSY], stdout=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        record = cgroups.apply("busy", [proc.pid], Limit(cpu=0.2, memory_mb=200))
        out, _ = proc.communicate(timeout=30)
        assert record["applied"], record
        assert record["method"].startswith("cgroup")
        assert float(out) < 0.6, "1 s of busy loop under 0.2 CPU used far less than 1 s of CPU"
        stats = cgroups.stats("busy")
        assert stats["nr_throttled"] > 0
    finally:
        proc.kill()
        proc.wait()
        cgroups.release()
    assert not any(Path(p).exists() for p in record["paths"]), "release() removes the groups"


def test_memory_limit_kills_an_oversized_process(cgroups_writable: str | None) -> None:
    if cgroups_writable:
        pytest.skip(cgroups_writable)
    cgroups = Cgroups(f"test-{uuid.uuid4().hex[:8]}")
    code = "import sys\nsys.stdin.readline()\nb = bytearray(300 * 1024 * 1024)\nprint('survived')"
    proc = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            text=True, start_new_session=True)
    try:
        record = cgroups.apply("big", [proc.pid], Limit(memory_mb=100))
        assert record["applied"], record
        out, _ = proc.communicate("go\n", timeout=30)  # allocate only once inside the group
        assert proc.returncode != 0
        assert "survived" not in out
        assert cgroups.stats("big").get("oom_kills", 1) >= 1
    finally:
        proc.kill()
        proc.wait()
        cgroups.release()
