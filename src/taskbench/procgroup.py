"""One child process in a process group of its own, stopped by its group id (SIGTERM, then SIGKILL).

Neutral: the harness's :class:`~taskbench.harness.processes.ProcessSet` and the drain measurement
(which runs inside a backend's environment, where the harness is not imported) both use it.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO


@dataclass
class Managed:
    """One child process the harness started."""

    name: str
    argv: list[str]
    log_path: Path
    cpus: list[int] | None = None
    popen: subprocess.Popen[bytes] | None = None
    env: dict[str, str] = field(default_factory=dict, repr=False)
    _log: IO[bytes] | None = field(default=None, repr=False)

    @property
    def pid(self) -> int:
        assert self.popen is not None
        return self.popen.pid

    def start(self, env: Mapping[str, str]) -> None:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self._log = self.log_path.open("ab")
        self.env = dict(env)
        self.popen = subprocess.Popen(
            self.argv,
            env=self.env,
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # own process group: stop() reaches its children too
        )
        if self.cpus:
            with contextlib.suppress(OSError):  # affinity is best effort; placement records it
                os.sched_setaffinity(self.popen.pid, self.cpus)

    def exit_code(self) -> int | None:
        return None if self.popen is None else self.popen.poll()

    def alive(self) -> bool:
        return self.popen is not None and self.popen.poll() is None

    def stop(self, timeout: float = 10.0, first: signal.Signals = signal.SIGTERM) -> int | None:
        """Signal the group (SIGTERM), wait up to ``timeout``, then SIGKILL it. Returns the exit code."""
        if self.popen is None:
            return None
        pgid = self.popen.pid  # start_new_session made the child its group's leader
        _signal_group(pgid, first)
        try:
            code = self.popen.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            _signal_group(pgid, signal.SIGKILL)
            code = self.popen.wait()
        # the leader is gone; anything left in its group (a pool child) gets the same treatment
        _signal_group(pgid, signal.SIGKILL)
        if self._log is not None:
            self._log.close()
            self._log = None
        return code

    def tail(self, lines: int = 15) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])


def _signal_group(pgid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def tree_cpu_seconds(pid: int) -> float:
    """CPU time (user + system) of a process and its live children: on a shared machine, CPU per
    request or per task moves less than a rate does. A process gone meanwhile counts nothing."""
    import psutil

    try:
        root = psutil.Process(pid)
        procs = [root, *root.children(recursive=True)]
    except psutil.Error:
        return 0.0
    total = 0.0
    for proc in procs:
        try:
            times = proc.cpu_times()
        except psutil.Error:
            continue
        total += times.user + times.system
    return total
