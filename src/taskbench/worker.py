"""Worker process entry: runs one backend's consumer loop with the shared workloads."""

from __future__ import annotations

import logging
import os
import time

from taskbench import backends
from taskbench.backends.base import WorkerContext
from taskbench.settings import Settings
from taskbench.workloads import Workloads

log = logging.getLogger("taskbench.worker")


def ready_key(settings: Settings) -> str:
    """Hash of component -> readiness time; the harness waits on it."""
    return f"{settings.prefix}ready"


async def run(settings: Settings) -> None:
    meta = backends.info(settings.backend)
    if not meta.has_worker:
        raise SystemExit(f"backend {meta.name!r} has no worker process: its tasks run in the API")
    backend = backends.load(meta.name)
    async with Workloads(settings) as workloads:

        async def ready() -> None:
            field = f"worker:{os.getpid()}"
            await workloads.redis.hset(ready_key(settings), field, str(time.time()))
            log.info("%s worker %d ready", meta.name, os.getpid())

        await backend.run_worker(
            WorkerContext(settings=settings, execute=workloads.run, ready=ready)
        )
        await workloads.redis.hdel(ready_key(settings), f"worker:{os.getpid()}")


def main(settings: Settings) -> None:
    try:
        import uvloop

        uvloop.run(run(settings))
    except ImportError:  # pragma: no cover - uvloop is missing on Windows only
        import asyncio

        asyncio.run(run(settings))
