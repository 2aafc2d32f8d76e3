"""The resident memory of the processes that run a case's tasks, sampled over the load and the drain.

A task that leaks shows as memory that grows with the tasks run and stays after them: each sample is
the memory of every process that runs tasks (each worker with all its descendants: pool children, forked
work horses and process workers; the API for ``background``), summed, read from ``/proc`` every
``interval`` seconds on a thread of the harness. Each process counts its proportional set size (PSS,
``/proc/<pid>/smaps_rollup``): a page shared by a parent and its forked children is divided among them,
so the sum is the tree's real footprint and one backend's figure compares with another's (summed RSS
counted a forking worker's shared pages once per child: a pool of ten forking workers showed 900 MB). Where the
kernel has no ``smaps_rollup`` (before Linux 4.14) the RSS is read instead. Off Linux (no ``/proc``)
there are no samples.

A soak (:mod:`taskbench.harness.soak.sampler`) reads the same figures per process tree, with each tree's
CPU time beside its memory (:func:`usage`).
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from taskbench.results import RssRecord

_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096
MB = 1024 * 1024


def _children() -> dict[int, list[int]]:
    """Parent pid -> child pids, for every process this user can see."""
    tree: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        # "pid (comm) state ppid ...": comm may hold spaces and parentheses; the rest follows the last ")"
        fields = stat[stat.rfind(")") + 2:].split()
        if len(fields) > 1 and fields[1].isdigit():
            tree.setdefault(int(fields[1]), []).append(int(entry.name))
    return tree


def _rss(pid: int) -> int:
    """Bytes of ``pid``'s proportional set size (its resident set where the kernel has no PSS); 0 when gone."""
    try:
        rollup = Path(f"/proc/{pid}/smaps_rollup").read_text()
    except FileNotFoundError:
        if Path(f"/proc/{pid}").exists():  # a kernel without smaps_rollup
            return _statm_rss(pid)
        return 0  # gone between the listing and the read
    except OSError:
        return 0
    for line in rollup.splitlines():
        if line.startswith("Pss:"):
            return int(line.split()[1]) * 1024
    return 0


def _statm_rss(pid: int) -> int:
    try:
        return int(Path(f"/proc/{pid}/statm").read_text().split()[1]) * _PAGE
    except (OSError, IndexError, ValueError):
        return 0  # gone between the listing and the read


def _descendants(roots: list[int], tree: dict[int, list[int]]) -> set[int]:
    seen: set[int] = set()
    todo = list(roots)
    while todo:
        pid = todo.pop()
        if pid in seen:
            continue
        seen.add(pid)
        todo += tree.get(pid, [])
    return seen


def tree_sizes(roots: Mapping[str, int]) -> dict[str, int]:
    """Per name, how many processes its root and all their descendants are now (0: the root is gone)."""
    tree = _children()
    return {name: len(_descendants([pid], tree)) if Path(f"/proc/{pid}").exists() else 0
            for name, pid in roots.items()}


def tree_rss(roots: list[int]) -> int:
    """Bytes resident in ``roots`` and all their descendants (PSS: a shared page counted once in all)."""
    return sum(_rss(pid) for pid in _descendants(roots, _children()))


_TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def _cpu_s(pid: int) -> float:
    """CPU seconds of ``pid`` and of its children it has waited for (user + system); 0 when gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return 0.0
    fields = stat[stat.rfind(")") + 2:].split()  # fields 3.. of proc(5): utime is the 14th, cstime the 17th
    try:
        return sum(int(fields[i]) for i in (11, 12, 13, 14)) / _TICK
    except (IndexError, ValueError):
        return 0.0


@dataclass(frozen=True)
class Usage:
    """One process tree's memory (PSS bytes) and CPU (seconds, every process of the tree and the children
    it reaped: each CPU second counted once)."""

    pss: int
    cpu_s: float


def usage(roots: Mapping[str, int]) -> dict[str, Usage]:
    """Name -> the memory and CPU of that root's tree, from one listing of ``/proc`` (a soak's sample)."""
    tree = _children()
    found: dict[str, Usage] = {}
    for name, root in roots.items():
        pids = _descendants([root], tree)
        found[name] = Usage(pss=sum(_rss(pid) for pid in pids), cpu_s=sum(_cpu_s(pid) for pid in pids))
    return found


class RssSampler:
    """Samples ``pids()`` (the task processes' current pids, so a restarted worker is followed) on a
    thread from :meth:`start` to :meth:`stop`, which returns the record."""

    def __init__(self, pids: Callable[[], dict[str, int]], interval: float = 1.0) -> None:
        self._pids = pids
        self.interval = interval
        self._samples: list[float] = []
        self._names: set[str] = set()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _sample(self) -> None:
        found = self._pids()
        self._names.update(found)
        self._samples.append(round(tree_rss(list(found.values())) / MB, 2))

    def _loop(self) -> None:
        while True:
            with contextlib.suppress(Exception):  # a figure beside the run: a failed sample is a missing one
                self._sample()
            if self._stop.wait(self.interval):
                return

    def start(self) -> RssSampler:
        if Path("/proc/self/statm").exists():
            self._thread = threading.Thread(target=self._loop, name="taskbench-rss", daemon=True)
            self._thread.start()
        return self

    def stop(self) -> RssRecord | None:
        if self._thread is None:
            return None
        self._stop.set()
        self._thread.join(timeout=10)
        self._thread = None
        with_samples = [s for s in self._samples if s > 0]
        if not with_samples:
            return None
        return RssRecord(interval_s=self.interval, samples_mb=self._samples, start_mb=with_samples[0],
                         peak_mb=max(with_samples), end_mb=with_samples[-1], processes=sorted(self._names))
