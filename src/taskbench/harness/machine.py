"""Facts recorded with every result: the machine, the commit, the tool versions."""

from __future__ import annotations

import os
import platform
import subprocess
import sys
from pathlib import Path
from typing import Any

from taskbench.redaction import redact_argv


def machine_info() -> dict[str, Any]:
    import psutil

    model = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        model = platform.processor()
    return {
        "hostname": platform.node(),
        "system": f"{platform.system()} {platform.release()}",
        "machine": platform.machine(),
        "cpu_model": model,
        "logical_cpus": os.cpu_count(),
        "usable_cpus": sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
        "memory_bytes": psutil.virtual_memory().total,
        "python": sys.version.split()[0],
        "implementation": platform.python_implementation(),
        "cpu_calibration": cpu_calibration(),
    }


def cpu_calibration(iterations: int = 1_000_000, rounds: int = 3) -> dict[str, Any]:
    """CPU milliseconds one core needs for ``crunch(iterations)`` (the cpu/* task), best of ``rounds``.

    Virtual machines change speed from day to day: the same host ran this in 50 ms one session and
    90 ms the next. Results from different runs compare only after scaling by this figure.
    """
    import time

    from taskbench.workloads import crunch

    best = float("inf")
    for _ in range(rounds):
        start = time.process_time()
        crunch(iterations)
        best = min(best, time.process_time() - start)
    return {"task": f"crunch({iterations})", "best_of": rounds, "cpu_ms": round(best * 1000, 1)}


def commit_info(root: Path | None) -> dict[str, Any]:
    if root is None:
        return {"commit": None}

    def git(*args: str) -> str:
        out = subprocess.run(
            ["git", "-C", str(root), *args], capture_output=True, text=True, check=False, timeout=10
        )
        return out.stdout.strip() if out.returncode == 0 else ""

    return {
        "commit": git("rev-parse", "HEAD") or None,
        "branch": git("rev-parse", "--abbrev-ref", "HEAD") or None,
        "dirty": bool(git("status", "--porcelain", "--untracked-files=no")),
    }


def result_header(run_id: str, root: Path | None) -> dict[str, Any]:
    """The fields every result starts with: what ran, when, where, from which commit."""
    import datetime as dt

    return {
        "run_id": run_id,
        "created": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "command": redact_argv(sys.argv),  # as typed, but never a password (--redis-url redis://:pw@…)
        "machine": machine_info(),
        "commit": commit_info(root),
    }
