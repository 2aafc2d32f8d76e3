"""One child process in a process group of its own, stopped by its group id (SIGTERM, then SIGKILL).

A taskbench component (``python -m taskbench serve|worker``) that is still running when its stop
timeout ends is asked for its threads' stacks first (:data:`DUMP_SIGNAL`, which it handles with
:func:`dump_stacks_on_signal`): they land at the end of its log, so a stop that had to be forced says
where it hung. Anything else is killed at once.

Every group a process starts this way dies with that process, however it dies (SIGKILL, the OOM
killer): the first start launches a **reaper** (``python -m taskbench.procgroup``, in a session of its
own) that holds the read end of a pipe whose write end only the starting process has. Each group is
announced on the pipe when it starts and withdrawn when it is stopped; when the starter dies, the
kernel closes the pipe, the reaper reads end-of-file and SIGKILLs every group still announced, then
exits. A pipe, not a parent-death signal: ``PR_SET_PDEATHSIG`` fires when the *thread* that forked
exits (a fault's thread restarts workers), is cleared in grandchildren and does not reach a group's
pool children. Every child also carries :data:`OWNER_ENV` when the starter has it (a run's marker,
:mod:`taskbench.harness.processes.runs`), so what survives anyway can be found by its environment.

Neutral: the harness's :class:`~taskbench.harness.processes.process_set.ProcessSet` and the drain measurement
(which runs inside a backend's environment, where the harness is not imported) both use it.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

#: asks a taskbench component for its threads' stacks (faulthandler writes them to its log)
DUMP_SIGNAL = signal.SIGUSR2
#: how long the harness gives a component to write its stacks before the SIGKILL
DUMP_WAIT = 1.0
COMPONENTS = frozenset({"serve", "worker"})
#: the marker of the run that started a process, ``<harness pid>:<token>``: every child inherits it
OWNER_ENV = "TASKBENCH_OWNER"


class _Reaper:
    """The process that kills this process's groups once this process is gone (see the module's text)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._proc: subprocess.Popen[bytes] | None = None
        self._groups: set[int] = set()

    def watch(self, pgid: int) -> None:
        with self._lock:
            self._groups.add(pgid)
            self._send(f"+{pgid}\n")

    def forget(self, pgid: int) -> None:
        with self._lock:
            if pgid in self._groups:
                self._groups.discard(pgid)
                self._send(f"-{pgid}\n")

    @property
    def pid(self) -> int | None:
        return None if self._proc is None else self._proc.pid

    def _send(self, line: str) -> None:
        for _ in range(2):  # a reaper that died (killed by hand) is started again with every group
            if self._proc is None or self._proc.poll() is not None:
                try:
                    self._proc = self._start()
                except OSError:  # no reaper: the groups are still stopped on every path but a hard kill
                    self._proc = None
                    return
                line = "".join(f"+{g}\n" for g in sorted(self._groups)) + (line if line[0] == "-" else "")
            try:
                assert self._proc.stdin is not None
                self._proc.stdin.write(line.encode())
                self._proc.stdin.flush()
                return
            except (BrokenPipeError, OSError):
                self._proc = None

    @staticmethod
    def _start() -> subprocess.Popen[bytes]:
        # stdin: the pipe (its write end is close-on-exec here, so no other child holds it open);
        # a session of its own: Ctrl-C on the terminal, or a kill of the harness's group, misses it
        return subprocess.Popen([sys.executable, "-m", "taskbench.procgroup"], stdin=subprocess.PIPE,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)


_reaper = _Reaper()


def watch_group(pgid: int) -> None:
    """SIGKILL process group ``pgid`` when this process dies without having stopped it."""
    _reaper.watch(pgid)


def forget_group(pgid: int) -> None:
    """The group was stopped: nothing for the reaper to do about it any more."""
    _reaper.forget(pgid)


def reaper_pid() -> int | None:
    """The reaper of this process's groups (None until the first start)."""
    return _reaper.pid


def _reap(stream: IO[bytes]) -> None:
    """The reaper's loop: follow the announced groups until end-of-file, then SIGKILL those left."""
    groups: set[int] = set()
    for raw in stream:
        line = raw.strip()
        if line[:1] == b"+":
            groups.add(int(line[1:]))
        elif line[:1] == b"-":
            groups.discard(int(line[1:]))
    for pgid in sorted(groups):  # the starter is gone: nothing will stop, audit or wait for them
        _signal_group(pgid, signal.SIGKILL)


def exit_with_parent(parent: int, interval: float = 0.5) -> None:
    """In a child that is no group leader of its own (a driver process): exit once ``parent`` is gone.

    A thread polls ``getppid()``: it changes only when the whole parent process exits, whichever thread
    forked (a parent-death signal follows the forking thread).
    """
    import time

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(interval)
        os._exit(1)

    threading.Thread(target=watch, name="taskbench-parent-watch", daemon=True).start()


def dump_stacks_on_signal() -> None:
    """In a component: write every thread's Python stack to stderr (the log) on :data:`DUMP_SIGNAL`."""
    import faulthandler
    import sys

    # stderr that is no file (io.UnsupportedOperation, a ValueError: the command called in-process, as the
    # CLI's tests do) or none at all (RuntimeError) has no log to write to
    with contextlib.suppress(ValueError, RuntimeError):
        faulthandler.register(DUMP_SIGNAL, file=sys.stderr, all_threads=True)


@dataclass
class Managed:
    """One child process the harness started."""

    name: str
    argv: list[str]
    log_path: Path
    cpus: list[int] | None = None
    popen: subprocess.Popen[bytes] | None = None
    env: dict[str, str] = field(default_factory=dict, repr=False)
    #: handles :data:`DUMP_SIGNAL`; None: taskbench's ``serve`` and ``worker`` do, anything else not
    stack_dump: bool | None = None
    #: run as this user (a server that refuses root, started by a harness running as root)
    user: str | None = None
    _log: IO[bytes] | None = field(default=None, repr=False)

    @property
    def pid(self) -> int:
        assert self.popen is not None
        return self.popen.pid

    def start(self, env: Mapping[str, str]) -> None:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self._log = self.log_path.open("ab")
        self.env = dict(env)
        if OWNER_ENV in os.environ:  # the run's marker: what survives a dead run can be found by it
            self.env.setdefault(OWNER_ENV, os.environ[OWNER_ENV])
        try:
            self.popen = subprocess.Popen(
                self.argv,
                env=self.env,
                stdin=subprocess.DEVNULL,
                stdout=self._log,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # own process group: stop() reaches its children too
                user=self.user,
            )
        except BaseException:  # nothing started (a missing program): the log is not left open
            self._log.close()
            self._log = None
            raise
        watch_group(self.popen.pid)
        if self.cpus:
            with contextlib.suppress(OSError):  # affinity is best effort; placement records it
                os.sched_setaffinity(self.popen.pid, self.cpus)

    @property
    def dumps_stacks(self) -> bool:
        """Whether it writes its stacks on :data:`DUMP_SIGNAL` (taskbench's components do)."""
        if self.stack_dump is not None:
            return self.stack_dump
        return self.argv[1:3] == ["-m", "taskbench"] and len(self.argv) > 3 and self.argv[3] in COMPONENTS

    def exit_code(self) -> int | None:
        return None if self.popen is None else self.popen.poll()

    def alive(self) -> bool:
        return self.popen is not None and self.popen.poll() is None

    def stop(self, timeout: float = 10.0, first: signal.Signals = signal.SIGTERM) -> int | None:
        """Signal the group (SIGTERM), wait up to ``timeout``, then SIGKILL it. Returns the exit code.

        A component still running after ``timeout`` writes its stacks to its log before the SIGKILL.
        """
        if self.popen is None:
            return None
        pgid = self.popen.pid  # start_new_session made the child its group's leader
        _signal_group(pgid, first)
        try:
            code = self.popen.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            if first != signal.SIGKILL and self.dumps_stacks:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pgid, DUMP_SIGNAL)  # the leader only: a pool child need not handle it
                with contextlib.suppress(subprocess.TimeoutExpired):
                    self.popen.wait(timeout=DUMP_WAIT)
            _signal_group(pgid, signal.SIGKILL)
            code = self.popen.wait()
            if code == -DUMP_SIGNAL:  # it had no handler yet: the signal ended it, a forced stop all the same
                code = -signal.SIGKILL
        # the leader is gone; anything left in its group (a pool child) gets the same treatment
        _signal_group(pgid, signal.SIGKILL)
        forget_group(pgid)
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


def _tree_sum(pid: int, read: Callable[[Any], float]) -> float:
    """``read`` summed over a process and its live children; a process gone meanwhile counts nothing."""
    import psutil

    try:
        root = psutil.Process(pid)
        procs = [root, *root.children(recursive=True)]
    except psutil.Error:
        return 0.0
    total = 0.0
    for proc in procs:
        try:
            total += read(proc)
        except psutil.Error:
            continue
    return total


def tree_cpu_seconds(pid: int) -> float:
    """CPU time (user + system) of a process and its live children: on a shared machine, CPU per
    request or per task moves less than a rate does."""
    return _tree_sum(pid, lambda proc: sum(proc.cpu_times()[:2]))


def tree_rss_mb(pid: int) -> float:
    """Resident memory of a process and its live children, in MB."""
    return _tree_sum(pid, lambda proc: proc.memory_info().rss / 1e6)


if __name__ == "__main__":  # the reaper (see the module's text)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _reap(sys.stdin.buffer)
