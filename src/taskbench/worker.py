"""Worker process entry: runs one backend's consumer loop with the shared workloads."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import threading
import time
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING

from taskbench import backends, heap
from taskbench.backends.base import CountsQueue, WorkerContext
from taskbench.ledger.recording import Threading
from taskbench.metrics import exposition_registry, final_key
from taskbench.settings import Settings
from taskbench.workloads import Workloads

if TYPE_CHECKING:
    from taskbench.backends.base import Backend

log = logging.getLogger("taskbench.worker")

#: how often a worker reads its queue's depth for the ``taskbench_queue_depth`` gauge
DEPTH_INTERVAL = 1.0
#: seconds after the library stopped before a stop that has not ended is reported (:func:`_stop_watchdog`)
STOP_REPORT_S = 10.0


@contextlib.asynccontextmanager
async def metrics_server(settings: Settings, workloads: Workloads, component: str) -> AsyncIterator[str]:
    """Serve this process's /metrics (with its pool children's) and register its URL in Redis."""
    from prometheus_client import generate_latest, start_http_server

    registry = exposition_registry()
    server, thread = start_http_server(settings.metrics_port, addr=settings.metrics_host, registry=registry)
    url = f"http://{settings.metrics_host}:{server.server_port}/metrics"
    await workloads.redis.hset(settings.metrics_key, component, url)
    try:
        yield url
    finally:
        # the counters as this process stops: the harness reads them once it can no longer scrape them
        # (workers stopped before the audit, after a drain timeout); a Redis that is gone gets none
        with contextlib.suppress(Exception):
            await workloads.redis.hset(final_key(settings.prefix), component, generate_latest(registry).decode())
        # the URL stays registered; the run's cleanup deletes it
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


async def _watch_depth(backend: Backend, settings: Settings, workloads: Workloads, stop: asyncio.Event) -> None:
    """Read the queue's depth every :data:`DEPTH_INTERVAL` until ``stop`` is set.

    The loop ends on ``stop``, not on a cancellation alone: a Redis client cancelled inside a command can
    raise a ConnectionError instead of CancelledError, which the loop takes for a broker hiccup, and the
    worker's stop then waited for it for good (a Dramatiq worker, SIGKILLed after 30 s; its stop watchdog
    showed ``await watcher`` in ``run`` and this loop asleep)."""
    if not isinstance(backend, CountsQueue):
        return  # the library offers no cheap way to count waiting tasks
    # the queue is on the broker's Redis: the ledger's client when they share a server
    own = settings.own_broker_redis
    if own:
        import redis.asyncio as aioredis

        broker = aioredis.Redis.from_url(settings.broker_address)
    else:
        broker = workloads.redis
    try:
        while not stop.is_set():
            try:
                workloads.metrics.set_depth(await backend.queue_depth(settings, broker))
            except Exception as exc:  # a broker hiccup must not stop the worker
                log.debug("queue depth unavailable: %r", exc)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), DEPTH_INTERVAL)
    finally:
        if own:
            await broker.aclose()


async def run(settings: Settings) -> None:
    meta = backends.info(settings.backend)
    if not meta.has_worker:
        raise SystemExit(f"backend {meta.name!r} has no worker process: its tasks run in the API")
    backend = backends.load(meta.name)
    component = f"worker:{os.getpid()}"
    async with Workloads(settings) as workloads, metrics_server(settings, workloads, component) as url:
        # a worker's tasks run on its loop unless its backend says otherwise (taskbench.ledger.recording)
        workloads.recorder.tasks_run(Threading.LOOP)

        async def ready() -> None:
            await workloads.redis.hset(settings.ready_key, component, str(time.time()))
            log.info("%s worker %d ready, metrics at %s", meta.name, os.getpid(), url)

        stopping = asyncio.Event()
        watcher = asyncio.create_task(_watch_depth(backend, settings, workloads, stopping))
        heap.freeze(settings.gc_freeze)  # start-up is over (taskbench/heap.py)
        try:
            await backend.run_worker(WorkerContext(settings=settings, execute=workloads.run, ready=ready,
                                                   recording=workloads.recorder,
                                                   execute_here=workloads.run_here))
        finally:
            watchdog = _stop_watchdog(asyncio.get_running_loop(), meta.name)
            stopping.set()
            watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await watcher
        await workloads.redis.hdel(settings.ready_key, component)
    watchdog.cancel()


def _stop_watchdog(loop: asyncio.AbstractEventLoop, backend: str) -> threading.Timer:
    """Once the library has stopped, the rest of the stop is taskbench's own (a few Redis writes, the pools):
    if it has not ended within :data:`STOP_REPORT_S`, write what the loop is waiting on to the log.

    Seen twice, with three and four test processes on two cores: a Celery and a thread-pool worker whose library
    had stopped (no thread of it left) sat on an idle loop until SIGKILLed; the threads' stacks (DUMP_SIGNAL)
    cannot say which await it was, the tasks' stacks can (docs/benchmarks.md, "The test suite's own time")."""

    def report() -> None:
        try:
            tasks = list(asyncio.all_tasks(loop))  # from another thread: a diagnosis, read as it is
        except RuntimeError:  # the set changed while it was read
            tasks = []
        lines = [f"{backend} worker: its library stopped {STOP_REPORT_S:g} s ago and the stop has not ended; "
                 f"the loop's {len(tasks)} task(s):"]
        lines += [f"  {task.get_name()}: {_awaiting(task.get_coro())}" for task in tasks]
        log.warning("\n".join(lines))

    timer = threading.Timer(STOP_REPORT_S, report)
    timer.daemon = True
    timer.start()
    return timer


def main(settings: Settings) -> None:
    try:
        import uvloop

        uvloop.run(run(settings))
    except ImportError:  # pragma: no cover - uvloop is missing on Windows only
        asyncio.run(run(settings))


def _awaiting(coro: object) -> str:
    """Where a suspended coroutine waits: its chain of awaits, outermost first, then what it waits on."""
    where = []
    for _ in range(32):  # bounded: a chain is a few frames deep
        frame = getattr(coro, "cr_frame", None) or getattr(coro, "gi_frame", None)
        if frame is None:
            where.append(repr(coro)[:200])
            break
        where.append(f"{frame.f_code.co_filename.rsplit('/', 1)[-1]}:{frame.f_lineno} {frame.f_code.co_name}")
        coro = getattr(coro, "cr_await", None) or getattr(coro, "gi_yieldfrom", None)
        if coro is None:
            break
    return " -> ".join(where)
