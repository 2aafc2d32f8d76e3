"""Floor of ``dramatiq``: ``incr.send(...)`` from a ``def`` endpoint (FastAPI runs it in its thread pool).

The broker is configured as the backend configures it (Redis namespace under the run's prefix, JSON,
its middleware list: Dramatiq's Prometheus middleware would open an exporter on 0.0.0.0).
"""

from __future__ import annotations

from typing import Any

import dramatiq
from dramatiq.brokers.redis import RedisBroker
from dramatiq.encoder import JSONEncoder
from dramatiq.middleware import AgeLimit, Retries, ShutdownNotifications, TimeLimit
from fastapi import FastAPI

from taskbench.backends._floor import ACCEPTED, HEALTH, Incr, prefix, redis_url


def create_app() -> FastAPI:
    dramatiq.set_encoder(JSONEncoder())
    broker = RedisBroker(url=redis_url(), namespace=f"{prefix()}dramatiq",
                         middleware=[AgeLimit(), TimeLimit(), ShutdownNotifications(), Retries(max_retries=3)])
    dramatiq.set_broker(broker)

    @dramatiq.actor(actor_name="incr", queue_name="default", broker=broker)  # type: ignore[untyped-decorator,unused-ignore]
    def incr_actor(value: int) -> None:
        """Runs in a Dramatiq worker (none runs while the floor is measured)."""

    app = FastAPI()

    @app.get("/health")
    async def health() -> dict[str, str]:
        return HEALTH

    @app.post("/api/v1/incr/io/simple/dramatiq", status_code=ACCEPTED)
    def incr(task: Incr) -> dict[str, Any]:
        incr_actor.send(task.value)
        return {"status": "accepted", "task_id": task.task_id}

    return app
