"""Pieces the worker side of several backends shares: stop signals, and threads that run coroutines."""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from taskbench.backends.base import WorkerContext
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


def blocking_execute(ctx: WorkerContext) -> Callable[[dict[str, Any]], None]:
    """For a library that runs tasks in its own threads: run the task on this process's loop and wait.

    The loop (the caller's, running now) owns the Workloads' Redis clients, so the coroutine must run
    there, not on a loop of the library's thread. The tasks reach the loop one at a time from those
    threads, so the ledger's records do not wait loop turns for one another (``tasks_from_threads``).
    """
    loop = asyncio.get_running_loop()
    execute = ctx.execute
    ctx.tasks_from_threads()

    async def run(payload: dict[str, Any]) -> None:
        await execute(TaskMessage.from_dict(payload))

    def call(payload: dict[str, Any]) -> None:
        asyncio.run_coroutine_threadsafe(run(payload), loop).result()

    return call
