"""CPU and memory limits per component, the way docker's ``cpus:`` / ``memory:`` apply them: cgroups.

The seed articles ran every service under docker limits (0.2 CPU / 200 MB ...). Without docker,
taskbench puts each component's process tree into a cgroup of its own:

- cgroup v2: ``cpu.max`` and ``memory.max`` (needs the controllers enabled for the parent);
- cgroup v1: ``cpu.cfs_quota_us``/``cpu.cfs_period_us`` and ``memory.limit_in_bytes``.

Groups are made under the cgroup the harness itself runs in, so any limit above still holds. When
a limit cannot be written (no permission, no controller), the run goes on and the record says so
and what was done instead: a CPU limit below one core becomes pinning to one core, which caps the
component at one core (not at the fraction asked for).
"""

from __future__ import annotations

import contextlib
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path("/sys/fs/cgroup")
PERIOD_US = 100_000


@dataclass(frozen=True, kw_only=True)
class Limit:
    """A component's limits: CPUs (fractions allowed, like docker's ``cpus``) and memory in MB."""

    cpu: float | None = None
    memory_mb: int | None = None

    def __post_init__(self) -> None:
        if self.cpu is not None and not 0.01 <= self.cpu <= 1024:
            raise ValueError(f"cpu limit must be between 0.01 and 1024 CPUs, not {self.cpu}")
        if self.memory_mb is not None and not 16 <= self.memory_mb <= 1_048_576:
            raise ValueError(f"memory limit must be between 16 and 1048576 MB, not {self.memory_mb}")

    def describe(self) -> str:
        parts = []
        if self.cpu is not None:
            parts.append(f"{self.cpu:g} CPU")
        if self.memory_mb is not None:
            parts.append(f"{self.memory_mb} MB")
        return " / ".join(parts) or "none"


def _own_path(controller: str) -> str:
    """This process's cgroup path for a v1 controller ('' for v2's unified line)."""
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return "/"
    for line in lines:
        _, names, path = line.split(":", 2)
        if controller in names.split(","):
            return path
    return "/"


def _v2_root() -> Path | None:
    for candidate in (ROOT, ROOT / "unified"):
        if (candidate / "cgroup.controllers").is_file():
            return candidate
    return None


def _tree_pids(pid: int) -> list[int]:
    import psutil

    try:
        proc = psutil.Process(pid)
        return [pid, *(c.pid for c in proc.children(recursive=True))]
    except psutil.NoSuchProcess:
        return []


def tree_cpu(pid: int) -> float | None:
    """CPU seconds (user + system) of a process and its live children."""
    import psutil

    try:
        root = psutil.Process(pid)
        total = 0.0
        for proc in [root, *root.children(recursive=True)]:
            try:
                times = proc.cpu_times()
                total += times.user + times.system
            except psutil.NoSuchProcess:
                continue
        return total
    except psutil.NoSuchProcess:
        return None


class Cgroups:
    """Makes, fills and removes one group per component for one run; records what it did."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.groups: dict[str, list[Path]] = {}
        self.records: dict[str, dict[str, Any]] = {}

    # -- placing a component ---------------------------------------------------------------

    def apply(self, component: str, pids: list[int], limit: Limit) -> dict[str, Any]:
        """Limit the process trees of ``pids`` (which must be running) and return the record."""
        record: dict[str, Any] = {"component": component, "cpu": limit.cpu, "memory_mb": limit.memory_mb,
                                  "applied": False, "method": None, "notes": []}
        everyone = [p for pid in pids for p in _tree_pids(pid)]
        if limit.cpu is None and limit.memory_mb is None:
            record["method"] = "none asked"
        else:
            errors: list[str] = []
            for attempt in (self._v2, self._v1):
                try:
                    method, paths = attempt(component, limit)
                except OSError as exc:
                    errors.append(f"{attempt.__name__.strip('_')}: {exc.strerror or exc}")
                    continue
                try:
                    for path in paths:
                        for pid in everyone:
                            with contextlib.suppress(ProcessLookupError):
                                _write(path / "cgroup.procs", str(pid))
                except OSError as exc:
                    errors.append(f"{method}: moving processes: {exc.strerror or exc}")
                    self._remove(paths)
                    continue
                self.groups[component] = paths
                record.update(applied=True, method=method, paths=[str(p) for p in paths])
                break
            if not record["applied"]:
                record["notes"].append("cgroups not writable here (" + "; ".join(errors) + ")")
                record["method"] = self._fallback(everyone, limit, record)
        record["pids"] = everyone
        self.records[component] = record
        return record

    def _v2(self, component: str, limit: Limit) -> tuple[str, list[Path]]:
        root = _v2_root()
        if root is None:
            raise OSError(2, "no cgroup v2 hierarchy with controllers")
        parent = root / _own_path("").lstrip("/") / f"taskbench-{self.name}"
        wanted = [c for c, v in (("cpu", limit.cpu), ("memory", limit.memory_mb)) if v is not None]
        available = (root / "cgroup.controllers").read_text().split()
        missing = [c for c in wanted if c not in available]
        if missing:
            raise OSError(95, f"controller(s) {', '.join(missing)} not available in cgroup v2")
        parent.mkdir(exist_ok=True)
        _write(parent / "cgroup.subtree_control", " ".join(f"+{c}" for c in wanted))
        group = parent / component
        group.mkdir(exist_ok=True)
        try:
            if limit.cpu is not None:
                _write(group / "cpu.max", f"{round(limit.cpu * PERIOD_US)} {PERIOD_US}")
            if limit.memory_mb is not None:
                _write(group / "memory.max", str(limit.memory_mb * 1024 * 1024))
        except OSError:
            self._remove([group, parent])
            raise
        return "cgroup-v2", [group]

    def _v1(self, component: str, limit: Limit) -> tuple[str, list[Path]]:
        made: list[Path] = []
        try:
            if limit.cpu is not None:
                group = self._v1_group("cpu", component)
                made.append(group)
                _write(group / "cpu.cfs_period_us", str(PERIOD_US))
                _write(group / "cpu.cfs_quota_us", str(round(limit.cpu * PERIOD_US)))
            if limit.memory_mb is not None:
                group = self._v1_group("memory", component)
                made.append(group)
                _write(group / "memory.limit_in_bytes", str(limit.memory_mb * 1024 * 1024))
        except OSError:
            self._remove(made)
            raise
        return "cgroup-v1", made

    def _v1_group(self, controller: str, component: str) -> Path:
        mount = ROOT / controller
        if not (mount / "cgroup.procs").is_file():
            raise OSError(2, f"no cgroup v1 '{controller}' controller at {mount}")
        parent = mount / _own_path(controller).lstrip("/") / f"taskbench-{self.name}"
        parent.mkdir(exist_ok=True)
        group = parent / component
        group.mkdir(exist_ok=True)
        return group

    @staticmethod
    def _fallback(pids: list[int], limit: Limit, record: dict[str, Any]) -> str:
        if limit.cpu is not None and limit.cpu < len(os.sched_getaffinity(0)):
            cores = sorted(os.sched_getaffinity(0))[: max(1, int(limit.cpu))]
            for pid in pids:
                with contextlib.suppress(OSError):
                    os.sched_setaffinity(pid, cores)
            record["notes"].append(f"instead: pinned to core(s) {cores}, which caps the component at "
                                   f"{len(cores)} core(s), not {limit.cpu:g}")
            if limit.memory_mb is not None:
                record["notes"].append("no memory limit applied")
            return "pinning"
        record["notes"].append("no limit applied")
        return "none"

    # -- reading and cleaning up -----------------------------------------------------------

    def stats(self, component: str) -> dict[str, Any]:
        """Throttling and memory figures of a component's group (what docker stats would show)."""
        out: dict[str, Any] = {}
        for path in self.groups.get(component, []):
            stat = _read_kv(path / "cpu.stat")
            if stat:
                out["nr_periods"] = stat.get("nr_periods")
                out["nr_throttled"] = stat.get("nr_throttled")
                if "throttled_time" in stat:  # v1, nanoseconds
                    out["throttled_s"] = stat["throttled_time"] / 1e9
                if "throttled_usec" in stat:  # v2
                    out["throttled_s"] = stat["throttled_usec"] / 1e6
                if "usage_usec" in stat:
                    out["cpu_s"] = stat["usage_usec"] / 1e6
            for name, key in (("memory.max_usage_in_bytes", "memory_peak_bytes"),
                              ("memory.peak", "memory_peak_bytes"), ("memory.failcnt", "memory_failcnt")):
                value = _read_int(path / name)
                if value is not None:
                    out[key] = value
            events = _read_kv(path / "memory.events") or _read_kv(path / "memory.oom_control")
            if "oom_kill" in events:
                out["oom_kills"] = events["oom_kill"]
        return out

    def release(self) -> None:
        """Remove every group (the processes must have exited; stragglers go to the parent group)."""
        parents: set[Path] = set()
        for paths in self.groups.values():
            self._remove(paths)
            parents.update(p.parent for p in paths)
        for parent in parents:
            with contextlib.suppress(OSError):
                parent.rmdir()
        self.groups.clear()

    @staticmethod
    def _remove(paths: list[Path]) -> None:
        for path in paths:
            for _ in range(50):
                try:
                    path.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    # still populated: move what is left (an exiting process) up, then retry
                    with contextlib.suppress(OSError):
                        for pid in (path / "cgroup.procs").read_text().split():
                            _write(path.parent / "cgroup.procs", pid)
                    time.sleep(0.05)


def _write(path: Path, text: str) -> None:
    with path.open("w") as fh:
        fh.write(text)


def _read_int(path: Path) -> int | None:
    try:
        return int(path.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def _read_kv(path: Path) -> dict[str, int]:
    try:
        lines = path.read_text().splitlines()
    except OSError:
        return {}
    out: dict[str, int] = {}
    for line in lines:
        key, _, value = line.partition(" ")
        with contextlib.suppress(ValueError):
            out[key] = int(value)
    return out
