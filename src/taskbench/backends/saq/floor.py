"""Floor of ``saq``: ``await queue.enqueue(...)`` on ``Queue.from_url`` (JSON, the backend's job options)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI, Request
from saq import Queue

from taskbench.backends._floor import ACCEPTED, HEALTH, Incr, prefix, redis_url, run_id

#: the backend's job options (seconds, attempts): they are part of what SAQ stores per job
TIMEOUT = 60
RETRIES = 1  # SAQ's default, and --option saq.retries's


def create_app() -> FastAPI:
    run = run_id()

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[dict[str, Any]]:
        queue = Queue.from_url(redis_url(), name=f"{prefix()}saq", dump=json.dumps, load=json.loads)
        await queue.connect()
        try:
            yield {"queue": queue}
        finally:
            await queue.disconnect()

    app = FastAPI(lifespan=lifespan)

    @app.get("/health")
    async def health() -> dict[str, str]:
        return HEALTH

    @app.post("/api/v1/incr/io/simple/saq", status_code=ACCEPTED)
    async def incr(task: Incr, request: Request) -> dict[str, str]:
        queue: Queue = request.state.queue
        await queue.enqueue("incr", key=f"{run}:{task.task_id}", timeout=TIMEOUT, heartbeat=TIMEOUT,
                            retries=RETRIES, ttl=-1, value=task.value)
        return {"status": "accepted", "task_id": task.task_id}

    return app
