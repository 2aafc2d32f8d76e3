"""Floor of ``huey``: calling a ``@huey.task()`` function from a ``def`` endpoint (FastAPI's thread pool).

Huey is configured as the backend configures it: ``RedisHuey`` named after the run (``clean_name=False``,
so the keys are the run's), no results, its ``Message`` as JSON instead of pickle.
"""

from __future__ import annotations

import json
from typing import Any

from fastapi import FastAPI
from huey import RedisHuey
from huey.registry import Message
from huey.serializer import Serializer

from taskbench.backends._floor import ACCEPTED, HEALTH, Incr, redis_url, run_id


class JsonSerializer(Serializer):  # type: ignore[misc]
    def _serialize(self, data: Any) -> bytes:
        return json.dumps(list(data)).encode()

    def _deserialize(self, data: bytes) -> Any:
        return Message(*json.loads(data))


def create_app() -> FastAPI:
    huey = RedisHuey(f"taskbench.{run_id()}", results=False, store_none=False, utc=True, url=redis_url(),
                     clean_name=False, serializer=JsonSerializer())

    @huey.task()  # type: ignore[untyped-decorator,unused-ignore]
    def incr_task(value: int) -> None:
        """Runs in a Huey consumer (none runs while the floor is measured)."""

    app = FastAPI()

    @app.get("/health")
    async def health() -> dict[str, str]:
        return HEALTH

    @app.post("/api/v1/incr/io/simple/huey", status_code=ACCEPTED)
    def incr(task: Incr) -> dict[str, Any]:
        incr_task(task.value)
        return {"status": "accepted", "task_id": task.task_id}

    return app
