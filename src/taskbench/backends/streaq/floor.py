"""Floor of ``streaq``: ``await worker.enqueue_unsafe(...)`` on a ``Worker`` opened as a client (JSON)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI, Request
from streaq import Worker

from taskbench.backends._floor import ACCEPTED, HEALTH, Incr, prefix, redis_url


def create_app() -> FastAPI:
    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[dict[str, Any]]:
        worker = Worker(redis_url=redis_url(), queue_name=f"{prefix()}streaq", serializer=json.dumps,
                        deserializer=json.loads)
        async with worker:
            yield {"worker": worker}

    app = FastAPI(lifespan=lifespan)

    @app.get("/health")
    async def health() -> dict[str, str]:
        return HEALTH

    @app.post("/api/v1/incr/io/simple/streaq", status_code=ACCEPTED)
    async def incr(task: Incr, request: Request) -> dict[str, str]:
        worker: Any = request.state.worker
        await worker.enqueue_unsafe("incr", task.value)
        return {"status": "accepted", "task_id": task.task_id}

    return app
