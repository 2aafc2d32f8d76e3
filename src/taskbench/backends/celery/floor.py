"""Floor of ``celery``: ``incr.apply_async(...)`` from a ``def`` endpoint (FastAPI runs it in its thread pool).

The app is configured as the backend configures it (JSON, late acks, keys under the run's prefix,
the run's queue): those decide what a publish writes.
"""

from __future__ import annotations

from typing import Any

from celery import Celery
from fastapi import FastAPI

from taskbench.backends._floor import ACCEPTED, HEALTH, Incr, prefix, redis_url


def create_app() -> FastAPI:
    celery = Celery("floor", broker=redis_url(), set_as_current=False)
    celery.conf.update(
        task_serializer="json", accept_content=["json"], task_ignore_result=True, result_backend=None,
        task_acks_late=True, worker_prefetch_multiplier=1, task_default_queue=f"{prefix()}celery",
        broker_transport_options={"global_keyprefix": prefix(), "visibility_timeout": 60},
        broker_pool_limit=32,
    )

    @celery.task(name="incr")  # type: ignore[untyped-decorator,unused-ignore]
    def incr_task(value: int) -> None:
        """Runs in a Celery worker (none runs while the floor is measured)."""

    app = FastAPI()

    @app.get("/health")
    async def health() -> dict[str, str]:
        return HEALTH

    @app.post("/api/v1/incr/io/simple/celery", status_code=ACCEPTED)
    def incr(task: Incr) -> dict[str, Any]:
        incr_task.apply_async((task.value,), task_id=task.task_id)
        return {"status": "accepted", "task_id": task.task_id}

    return app
