"""Child processes: each in its own process group, stopped by its id (SIGTERM, then SIGKILL)."""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Self

from taskbench.procgroup import Managed

__all__ = ["ProcessSet"]


@contextlib.contextmanager
def _interrupts_deferred() -> Iterator[None]:
    """Ignore SIGINT/SIGTERM/SIGHUP for the block (main thread only: elsewhere signals cannot be set)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    saved = {sig: signal.signal(sig, signal.SIG_IGN) for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    try:
        yield
    finally:
        for sig, handler in saved.items():
            signal.signal(sig, handler)


class ProcessSet:
    """Starts processes and guarantees that all of them are stopped on exit, whatever happened."""

    def __init__(self, env: Mapping[str, str], stop_timeout: float = 10.0) -> None:
        self.env = dict(env)
        self.stop_timeout = stop_timeout
        self.procs: list[Managed] = []
        self.exit_codes: dict[str, int | None] = {}
        self.killed: list[Managed] = []  # by kill(), in order
        #: the logs that end with a process's threads' stacks: killed at stop, it was asked for them first
        self.stacks: dict[str, Path] = {}
        self._lock = threading.Lock()  # a fault thread may kill and restart while the run goes on
        self._closed = False
        #: called once processes were stopped or killed and the rest go on (a stopped worker's spooled ledger
        #: records are forwarded then: :class:`taskbench.ledger.recording.spool.keeper.SpoolKeeper`)
        self.after_stop: Callable[[], object] | None = None

    def start(
        self,
        name: str,
        argv: Sequence[str],
        log_path: Path,
        *,
        cpus: list[int] | None = None,
        env: Mapping[str, str] | None = None,
    ) -> Managed:
        proc = Managed(name=name, argv=list(argv), log_path=log_path, cpus=cpus)
        with self._lock:
            if self._closed:
                raise RuntimeError(f"not starting {name}: the set is stopping")
            proc.start({**self.env, **(env or {})})
            self.procs.append(proc)
        return proc

    def get(self, name: str) -> Managed:
        for proc in self.procs:
            if proc.name == name:
                return proc
        raise KeyError(f"no process named {name!r}")

    def kill(self, name: str) -> tuple[int, int | None]:
        """SIGKILL a process's group at once (a crash, not a stop); returns its pid and exit code."""
        with self._lock:
            proc = self.get(name)
            pid = proc.pid
            code = proc.stop(timeout=0, first=signal.SIGKILL)
            self.procs.remove(proc)
            self.killed.append(proc)
        self._stopped()
        return pid, code

    def restart(self, name: str) -> Managed:
        """Start a killed process again: same name, command, log (appended) and cores."""
        with self._lock:
            if self._closed:
                raise RuntimeError(f"not restarting {name}: the set is stopping")
            old = next(p for p in reversed(self.killed) if p.name == name)
            proc = Managed(name=name, argv=old.argv, log_path=old.log_path, cpus=old.cpus)
            proc.start(old.env)
            self.procs.append(proc)
        return proc

    def revive(self, name: str) -> tuple[Managed, int | None]:
        """Start again a process that exited on its own, as a supervisor would (``restart: on-failure``):
        what is left of its group is stopped, it is filed with the killed, and the new one has its name,
        command, log (appended) and cores. Returns the new process and the old one's exit code."""
        with self._lock:
            old = next(p for p in self.procs if p.name == name and not p.alive())
            self.procs.remove(old)
            self.killed.append(old)
        code = old.stop(timeout=0, first=signal.SIGKILL)  # children its exit left behind, by group id
        self._stopped()
        return self.restart(name), code

    def dead(self) -> list[Managed]:
        return [p for p in self.procs if not p.alive()]

    def _stop(self, proc: Managed) -> None:
        self.exit_codes[proc.name] = code = proc.stop(timeout=self.stop_timeout)
        if code == -signal.SIGKILL and proc.dumps_stacks:
            self.stacks[proc.name] = proc.log_path

    def stop_some(self, names: Collection[str]) -> list[str]:
        """Stop these processes now, as :meth:`stop_all` would, and leave the others running; the names
        stopped (their exit codes join :attr:`exit_codes`)."""
        with _interrupts_deferred(), self._lock:
            chosen = [p for p in self.procs if p.name in names]
            for proc in chosen:
                self._stop(proc)
                self.procs.remove(proc)
        if chosen:
            self._stopped()
        return [p.name for p in chosen]

    def _stopped(self) -> None:
        if self.after_stop is not None:
            self.after_stop()

    def stop_all(self) -> dict[str, int | None]:
        # Reverse start order: the API (no new tasks) before the workers, servers last. A second
        # Ctrl-C (or a signal forwarded twice, as uv and timeout do) must not cut this loop short:
        # the stop is bounded anyway (SIGKILL after ``stop_timeout``).
        with _interrupts_deferred(), self._lock:
            self._closed = True
            for proc in reversed(self.procs):
                self._stop(proc)
            self.procs.clear()
        return self.exit_codes

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop_all()
