"""Deadlines for the request path: ``asyncio.timeout_at`` without a timer per request.

Every enqueue the API makes is bounded (``--enqueue-timeout``). ``asyncio.timeout_at`` arms a timer on
entry and cancels it on exit: under uvloop a libuv timer made and closed for every request, about 1 %
of the API's CPU (py-spy, docs/benchmarks.md). Here a block only notes its task and deadline in a dict,
and one sweep per event loop, every :data:`EVERY` seconds, cancels the tasks whose deadline has passed.
A deadline so fires up to :data:`EVERY` late, which a bound of seconds does not notice.

The semantics are ``asyncio.Timeout``'s: the block's task is cancelled at the deadline, the
``CancelledError`` leaving the block becomes ``TimeoutError``, and a cancellation from elsewhere (the
server shutting down, the client gone) that came at the same time stays a ``CancelledError``.
"""

from __future__ import annotations

import asyncio
from types import TracebackType
from typing import Final

#: seconds between two sweeps: how late a deadline may fire
EVERY: Final = 0.05


class Deadlines:
    """The sweep of one event loop (create it inside the loop; :meth:`close` stops it)."""

    def __init__(self, every: float = EVERY) -> None:
        self._loop = asyncio.get_running_loop()
        self._every = every
        self._active: dict[asyncio.Task[object], float] = {}
        self._expired: set[asyncio.Task[object]] = set()
        self._handle: asyncio.TimerHandle | None = self._loop.call_later(every, self._sweep)

    def at(self, when: float) -> Deadline:
        """``with deadlines.at(loop_time):``: the current task is cancelled once ``when`` has passed."""
        return Deadline(self, when)

    def _sweep(self) -> None:
        now = self._loop.time()
        for task, when in list(self._active.items()):
            if when <= now and task not in self._expired:
                self._expired.add(task)
                task.cancel()
        self._handle = self._loop.call_later(self._every, self._sweep)

    def close(self) -> None:
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None


class Deadline:
    __slots__ = ("_cancelling", "_owner", "_task", "_when")

    def __init__(self, owner: Deadlines, when: float) -> None:
        self._owner = owner
        self._when = when

    def __enter__(self) -> Deadline:
        task = asyncio.current_task()
        if task is None:
            raise RuntimeError("a deadline must be used inside a task")
        if task in self._owner._active:
            raise RuntimeError("deadlines do not nest: one per task at a time")
        self._task = task
        self._cancelling = task.cancelling()
        self._owner._active[task] = self._when
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        owner, task = self._owner, self._task
        del owner._active[task]
        if task in owner._expired:
            owner._expired.discard(task)
            # ours was the cancellation (and no other came meanwhile): the caller sees a timeout
            if task.uncancel() <= self._cancelling and exc_type is asyncio.CancelledError:
                raise TimeoutError from exc
