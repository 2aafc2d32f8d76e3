"""Pieces the worker side of several backends shares: stop signals, and threads that run coroutines."""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from taskbench.backends.base import WorkerContext
from taskbench.messages import TaskMessage
from taskbench.redis_pipe import same_redis

if TYPE_CHECKING:
    from taskbench.settings import Settings

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


def ledger_apart(settings: Settings) -> bool:
    """Whether the ledger's Redis is a server other than the library's broker. Then what the library does once
    a task returns (its acknowledgement, to its broker) cannot meet the record on the way: a record written
    before the task returned is in the kernel (a killed worker cannot take it back) and reaches a server that
    no broker fault touches; only that server's own failure could lose it, which would lose records that had
    been answered too (the ledger's Redis that taskbench starts keeps nothing on disk: ``appendonly no``)."""
    return not same_redis(settings.redis_url, settings.broker_address)


def blocking_execute(ctx: WorkerContext, *, acknowledges: bool = True) -> Callable[[dict[str, Any]], None]:
    """For a library that runs tasks in its own threads: run the task in the library's thread if its body
    needs no event loop (``ctx.run_here``: a no-op, ``io/simple`` with no delay, its record a blocking round
    trip on the thread's own connection), else on this process's loop, and wait.

    The loop (the caller's, running now) owns the Workloads' asyncio clients, so a coroutine must run
    there, not on a loop of the library's thread. The tasks reach the loop one at a time from those
    threads, so the ledger's records do not wait loop turns for one another (``tasks_from_threads``).

    A record made in the library's thread is written before the task returns and its reply read at a later
    record (:mod:`taskbench.ledger_thread`, "Confirmed later") when waiting for it protects nothing: the
    library acknowledges nothing once a task returns (``acknowledges=False``: Huey), or the ledger's Redis
    is not the library's broker (:func:`ledger_apart`). Else (a Redis that is both) each reply is waited for
    before the task returns, so that the library's acknowledgement cannot reach that Redis before the record.
    Confirmed later, in a worker the harness started, the record is a slot of a memory-mapped file instead
    (:mod:`taskbench.ledger_spool`), forwarded in batches by this worker and, if it is killed, by the harness.
    """
    loop = asyncio.get_running_loop()
    execute = ctx.execute
    run_here = ctx.run_here
    ctx.tasks_from_threads(confirm_later=not acknowledges or ledger_apart(ctx.settings))

    async def run(task: TaskMessage) -> None:
        await execute(task)

    def call(payload: dict[str, Any]) -> None:
        task = TaskMessage.from_dict(payload)
        if not run_here(task):
            asyncio.run_coroutine_threadsafe(run(task), loop).result()

    return call
