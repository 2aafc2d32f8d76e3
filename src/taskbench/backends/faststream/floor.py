"""Floor of ``faststream``: ``await broker.publish(...)`` to the run's Redis stream (XADD, JSON)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI
from faststream.redis import RedisBroker

from taskbench.backends._floor import ACCEPTED, HEALTH, Incr, prefix, redis_url


def create_app() -> FastAPI:
    broker = RedisBroker(redis_url(), logger=None)
    stream = f"{prefix()}faststream"

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[dict[str, Any]]:
        await broker.connect()
        try:
            yield {}
        finally:
            await broker.stop()

    app = FastAPI(lifespan=lifespan)

    @app.get("/health")
    async def health() -> dict[str, str]:
        return HEALTH

    @app.post("/api/v1/incr/io/simple/faststream", status_code=ACCEPTED)
    async def incr(task: Incr) -> dict[str, str]:
        await broker.publish({"value": task.value}, stream=stream, correlation_id=task.task_id)
        return {"status": "accepted", "task_id": task.task_id}

    return app
