"""Live progress of a run's phases (start, warm-up, load, drain, audit): rate, accepted, executed, ETA.

On a terminal it is a rich.progress display; otherwise (CI logs, a pipe) one plain line when a phase
starts, every few seconds, and when it ends. It stays out of the hot path: the driver runs in its
child processes and reports nothing while it runs; a thread here polls what the harness can read
cheaply (the ledger's count, one HLEN, twice a second) and the time elapsed.

The command line installs one reporter (:func:`install`); the harness calls :func:`phase`, which does
nothing when none is installed (tests, library use).
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

Count = Callable[[], int]


class Reporter:
    def __init__(self, console: Any, *, live: bool | None = None, every: float | None = None) -> None:
        self.console = console
        self.live = console.is_terminal if live is None else live
        self.every = every if every is not None else (0.5 if self.live else 5.0)
        self._progress: Any = None

    @contextlib.contextmanager
    def phase(self, name: str, *, total: int | None = None, duration: float | None = None,
              executed: Count | None = None, accepted: Count | None = None) -> Iterator[None]:
        from rich.markup import escape

        name = escape(name)  # "[arq] load" is text, not a style
        state = _State(name, total, duration, executed, accepted)
        with contextlib.suppress(Exception):
            state.poll()  # the first rate is measured from here
        stop = threading.Event()
        if self.live:
            from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

            self._progress = Progress(TextColumn("{task.description}"), BarColumn(bar_width=24),
                                      TextColumn("{task.fields[figures]}"), TimeElapsedColumn(),
                                      console=self.console, transient=True)
            task = self._progress.add_task(name, total=total or (duration and duration) or None, figures="")
            self._progress.start()

            def show() -> None:
                done = state.poll()
                self._progress.update(task, completed=state.progress(done), figures=state.figures(done))
        else:

            def show() -> None:
                self.console.print(f"[dim]{name}: {state.figures(state.poll())}[/]")

        def loop() -> None:
            while not stop.wait(self.every):
                with contextlib.suppress(Exception):  # a progress line is never worth a failed run
                    show()

        thread = threading.Thread(target=loop, name=f"progress {name}", daemon=True)
        thread.start()
        try:
            yield
        finally:
            stop.set()
            thread.join(timeout=2)
            if self.live:
                self._progress.stop()
            took = time.monotonic() - state.started
            done = state.poll_quietly()
            self.console.print(f"[dim]{name}: done in {took:.1f} s"
                               + (f", {state.figures(done, final=True)}" if state.counting else "") + "[/]")


class _State:
    def __init__(self, name: str, total: int | None, duration: float | None, executed: Count | None,
                 accepted: Count | None) -> None:
        self.name, self.total, self.duration = name, total, duration
        self.executed, self.accepted = executed, accepted
        self.started = time.monotonic()
        self._last: tuple[float, int] | None = None
        self.rate = 0.0

    @property
    def counting(self) -> bool:
        return self.executed is not None

    def poll(self) -> int:
        if self.executed is None:
            return 0
        done = self.executed()
        now = time.monotonic()
        if self._last is not None and now > self._last[0]:
            self.rate = (done - self._last[1]) / (now - self._last[0])
        self._last = (now, done)
        return done

    def poll_quietly(self) -> int:
        try:
            return self.executed() if self.executed else 0
        except Exception:  # the ledger's Redis may be gone at the end
            return self._last[1] if self._last else 0

    def progress(self, done: int) -> float:
        if self.duration:
            return min(self.duration, time.monotonic() - self.started)
        return float(done)

    def figures(self, done: int, *, final: bool = False) -> str:
        elapsed = time.monotonic() - self.started
        parts = []
        if self.accepted is not None:
            with contextlib.suppress(Exception):
                parts.append(f"accepted {self.accepted()}")
        if self.executed is not None:
            parts.append(f"executed {done}" + (f"/{self.total}" if self.total else ""))
            if not final:
                parts.append(f"{self.rate:.0f}/s")
        if not final:
            eta = self.eta(done, elapsed)
            parts.append(f"ETA {eta:.0f} s" if eta is not None else f"{elapsed:.0f} s")
        return ", ".join(parts)

    def eta(self, done: int, elapsed: float) -> float | None:
        if self.duration:
            return max(0.0, self.duration - elapsed)
        if self.total and self.rate > 0:
            return max(0.0, (self.total - done) / self.rate)
        return None


_current: Reporter | None = None


def install(reporter: Reporter | None) -> None:
    """The command line's reporter for this process (None: no progress)."""
    global _current
    _current = reporter


def phase_of(exc: BaseException) -> str | None:
    """The innermost phase an exception (an interrupt) left, None if it came outside every phase."""
    found = getattr(exc, "taskbench_phase", None)
    return found if isinstance(found, str) else None


@contextlib.contextmanager
def phase(name: str, **kwargs: Any) -> Iterator[None]:
    """A phase of the run, shown by the installed reporter; nothing without one."""
    try:
        if _current is None:
            yield
            return
        with _current.phase(name, **kwargs):
            yield
    except BaseException as exc:  # what an interrupted run was doing: the innermost phase says it
        if phase_of(exc) is None:
            exc.taskbench_phase = name  # type: ignore[attr-defined]
        raise
