"""The ceiling: a bare FastAPI endpoint doing one ``await redis.incr``, served like the real API.

A backend's enqueue path cannot be faster than this on the same core; docs/benchmarks.md compares
each backend against it (``taskbench ceiling``).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI, Request

from taskbench.settings import Settings


def create_app(settings: Settings | None = None) -> FastAPI:
    settings = settings or Settings()
    key = f"{settings.prefix}ceiling"

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[dict[str, Any]]:
        import redis.asyncio as aioredis

        client = aioredis.Redis.from_url(settings.redis_url)
        try:
            yield {"redis": client}
        finally:
            await client.aclose()

    app = FastAPI(lifespan=lifespan)

    @app.get("/health")
    async def health() -> dict[str, str]:
        return {"status": "ok"}

    # the reference API's path too, so that ``taskbench overhead`` sends every server the same request
    @app.post("/api/v1/incr", status_code=202)
    @app.post("/api/v1/incr/{kind}/{mode}/{backend}", status_code=202)
    async def incr(request: Request) -> dict[str, str]:
        await request.state.redis.incr(key)
        return {"status": "accepted"}

    return app
