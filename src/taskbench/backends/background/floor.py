"""Floor of ``background``: the seed's ``JSONResponse(..., background=BackgroundTask(incr))``."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import redis.asyncio as aioredis
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse
from starlette.background import BackgroundTask

from taskbench.backends._floor import ACCEPTED, HEALTH, Incr, prefix, redis_url


def create_app() -> FastAPI:
    key = f"{prefix()}counter"

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[dict[str, Any]]:
        # a blocking pool, as redis-py documents for bursts: tasks run after their responses, so more of
        # them than users can be in flight, and the default pool raises "Too many connections" at 100
        client = aioredis.Redis(connection_pool=aioredis.BlockingConnectionPool.from_url(
            redis_url(), max_connections=256, timeout=30))
        try:
            yield {"redis": client}
        finally:
            await client.aclose()

    app = FastAPI(lifespan=lifespan)

    @app.get("/health")
    async def health() -> dict[str, str]:
        return HEALTH

    @app.post("/api/v1/incr/io/simple/background")
    async def incr(task: Incr, request: Request) -> JSONResponse:
        client: aioredis.Redis = request.state.redis

        async def run(value: int) -> None:
            await client.incrby(key, value)

        return JSONResponse({"status": "accepted", "task_id": task.task_id}, status_code=ACCEPTED,
                            background=BackgroundTask(run, task.value))

    return app
