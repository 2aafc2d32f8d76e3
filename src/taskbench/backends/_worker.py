"""Pieces the worker side of several backends shares: stop signals, and threads that run coroutines."""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from taskbench.backends.base import WorkerContext
from taskbench.ledger.recording import Threading
from taskbench.messages import TaskMessage

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


@contextmanager
def stop_requested(on_stop: Callable[[], None] | None = None) -> Iterator[asyncio.Event]:
    """An event set by SIGTERM or SIGINT on the running loop (``on_stop`` is called once too)."""
    loop = asyncio.get_running_loop()
    event = asyncio.Event()

    def stop() -> None:
        if not event.is_set():
            event.set()
            if on_stop is not None:
                on_stop()

    for sig in STOP_SIGNALS:
        loop.add_signal_handler(sig, stop)
    try:
        yield event
    finally:
        for sig in STOP_SIGNALS:
            loop.remove_signal_handler(sig)


def blocking_execute(ctx: WorkerContext, *, acknowledges: bool = True) -> Callable[[dict[str, Any]], None]:
    """For a library that runs tasks in its own threads: run the task in the library's thread if its body
    needs no event loop (``ctx.execute_here``: a no-op, ``io/simple`` with no delay), else on this process's
    loop, and wait.

    The loop (the caller's, running now) owns the Workloads' asyncio clients, so a coroutine must run
    there, not on a loop of the library's thread. ``acknowledges``: the library acknowledges a task once it
    returned (False: a library that dequeues before it runs); the ledger's recording chooses from that and from
    where the tasks run (:class:`taskbench.ledger.recording.Recorder`), nothing else is said here.
    """
    loop = asyncio.get_running_loop()
    execute = ctx.execute
    run_here = ctx.execute_here
    if ctx.recording is not None:
        ctx.recording.tasks_run(Threading.THREADS, acknowledges=acknowledges)

    async def run(task: TaskMessage) -> None:
        await execute(task)

    def call(payload: dict[str, Any]) -> None:
        task = TaskMessage.from_dict(payload)
        if not run_here(task):
            asyncio.run_coroutine_threadsafe(run(task), loop).result()

    return call
