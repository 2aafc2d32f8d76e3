"""Floor of ``taskiq``: ``await incr.kiq(...)`` on taskiq-redis's ``RedisStreamBroker`` (JSON)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI
from taskiq.serializers import JSONSerializer
from taskiq_redis import RedisStreamBroker

from taskbench.backends._floor import ACCEPTED, HEALTH, Incr, prefix, redis_url


def create_app() -> FastAPI:
    broker = RedisStreamBroker(url=redis_url(), queue_name=f"{prefix()}taskiq",
                               consumer_group_name=f"{prefix()}taskiq").with_serializer(JSONSerializer())

    @broker.task(task_name="incr")  # type: ignore[untyped-decorator,unused-ignore]
    async def incr_task(value: int) -> None:
        """Runs in a taskiq worker (none runs while the floor is measured)."""

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[dict[str, Any]]:
        await broker.startup()
        try:
            yield {}
        finally:
            await broker.shutdown()

    app = FastAPI(lifespan=lifespan)

    @app.get("/health")
    async def health() -> dict[str, str]:
        return HEALTH

    @app.post("/api/v1/incr/io/simple/taskiq", status_code=ACCEPTED)
    async def incr(task: Incr) -> dict[str, str]:
        await incr_task.kiq(task.value)
        return {"status": "accepted", "task_id": task.task_id}

    return app
