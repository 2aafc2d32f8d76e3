"""FastAPI BackgroundTasks: the task runs in the API process after the response is sent."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING

from taskbench.backends.base import ServiceContext, WorkerContext

if TYPE_CHECKING:
    from fastapi import BackgroundTasks

    from taskbench.messages import TaskMessage
    from taskbench.settings import Settings
    from taskbench.workloads import Workloads


log = logging.getLogger("taskbench.backends.background.backend")


class _Producer:
    def __init__(self, workloads: Workloads) -> None:
        self._workloads = workloads

    async def enqueue(self, task: TaskMessage, later: BackgroundTasks) -> None:
        # Starlette runs these after the response, in order, in this process. There is no
        # queue: a task is lost if the process stops before it runs.
        later.add_task(self._run, task)

    async def _run(self, task: TaskMessage) -> None:
        # An exception here would propagate into the ASGI server and reset the client's
        # keep-alive connection; log it instead: the ledger reports the task as lost.
        try:
            await self._workloads.run(task)
        except Exception:
            log.exception("background task %s failed", task.task_id)


class BackgroundBackend:
    @asynccontextmanager
    async def producer(self, ctx: ServiceContext) -> AsyncIterator[_Producer]:
        yield _Producer(ctx.workloads)

    async def run_worker(self, ctx: WorkerContext) -> None:
        raise RuntimeError("the background backend has no worker: tasks run in the API process")

    async def purge(self, settings: Settings) -> None:
        pass  # nothing outside the API process


backend = BackgroundBackend()
