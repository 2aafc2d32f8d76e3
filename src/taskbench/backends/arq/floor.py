"""Floor of ``arq``: ``await pool.enqueue_job(...)`` on a pool from ``create_pool`` (msgpack, as the backend)."""

from __future__ import annotations

import functools
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import msgpack
from arq import create_pool
from arq.connections import ArqRedis, RedisSettings
from fastapi import FastAPI, Request

from taskbench.backends._floor import ACCEPTED, HEALTH, Incr, prefix, redis_url, run_id


def create_app() -> FastAPI:
    run = run_id()

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[dict[str, Any]]:
        pool = await create_pool(RedisSettings.from_dsn(redis_url()), job_serializer=msgpack.packb,
                                 job_deserializer=functools.partial(msgpack.unpackb, raw=False),
                                 default_queue_name=f"{prefix()}arq:queue")
        try:
            yield {"pool": pool}
        finally:
            await pool.aclose()

    app = FastAPI(lifespan=lifespan)

    @app.get("/health")
    async def health() -> dict[str, str]:
        return HEALTH

    @app.post("/api/v1/incr/io/simple/arq", status_code=ACCEPTED)
    async def incr(task: Incr, request: Request) -> dict[str, str]:
        pool: ArqRedis = request.state.pool
        await pool.enqueue_job("incr", task.value, _job_id=f"{run}:{task.task_id}")
        return {"status": "accepted", "task_id": task.task_id}

    return app
