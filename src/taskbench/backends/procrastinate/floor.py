"""Floor of ``procrastinate``: ``await task.configure(queueing_lock=...).defer_async(...)`` on an App opened
for the app's lifetime (``PsycopgConnector``, a psycopg 3 pool of 4 to 16 connections, as the backend).

The broker is ``TASKBENCH_BROKER_URL`` (PostgreSQL); every connection's ``search_path`` is the run's
schema, where ``taskbench prepare`` installed Procrastinate's tables, and the queue is the run's, both
named as ``taskbench.backends._postgres.schema`` and ``taskbench.backends.procrastinate.backend.queue_name``
name them (repeated here: a floor imports no taskbench code beyond ``_common``).
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI
from procrastinate import App, PsycopgConnector

from taskbench.backends._floor import ACCEPTED, HEALTH, Incr, broker_url, run_id
from taskbench.backends._floor import postgres_schema as _schema

TASK = "taskbench_execute"


def _queue(run: str) -> str:
    name = _schema(run)
    if len(name) > 40:  # a NOTIFY channel's 63 bytes, less ``procrastinate_queue_v1#``
        name = f"{name[:31]}_{hashlib.sha256(run.encode()).hexdigest()[:8]}"
    return name


def create_app() -> FastAPI:
    run = run_id()
    broker = broker_url()
    queue = App(connector=PsycopgConnector(conninfo=broker, kwargs={"options": f"-c search_path={_schema(run)}"},
                                           min_size=4, max_size=16))

    @queue.task(name=TASK, queue=_queue(run))  # type: ignore[untyped-decorator,unused-ignore]
    async def incr(value: int, task_id: str, enqueued_at: float) -> None:  # run by no worker here
        raise NotImplementedError

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[dict[str, Any]]:
        async with queue.open_async():
            yield {}

    app = FastAPI(lifespan=lifespan)

    @app.get("/health")
    async def health() -> dict[str, str]:
        return HEALTH

    @app.post("/api/v1/incr/io/simple/procrastinate", status_code=ACCEPTED)
    async def enqueue(task: Incr) -> dict[str, str]:
        await incr.configure(queueing_lock=task.task_id).defer_async(
            value=task.value, task_id=task.task_id, enqueued_at=time.time())
        return {"status": "accepted", "task_id": task.task_id}

    return app
