"""Floor of ``rq``: ``queue.enqueue(...)`` from a ``def`` endpoint (FastAPI runs it in its thread pool).

The queue is configured as the backend configures it: every key under the run's prefix (``RQ_KEY_PREFIX``,
read by RQ when it is imported, so ``rq`` is imported once it is set), JSON, the task id as a unique job
id (escaped to RQ's letters, digits, ``_`` and ``-``), finished jobs kept as with ``idempotency`` on.
"""

from __future__ import annotations

import os
from typing import Any

from fastapi import FastAPI

from taskbench.backends._floor import ACCEPTED, HEALTH, Incr, prefix, redis_url

#: how long RQ keeps a finished job (the backend's REMEMBER_IDS)
RESULT_TTL = 30 * 86_400


def create_app(*, retry: bool = False, name: str = "rq") -> FastAPI:
    os.environ["RQ_KEY_PREFIX"] = f"{prefix()}rq"
    from redis import Redis
    from rq import Queue, Retry
    from rq.serializers import JSONSerializer

    queue = Queue("taskbench", connection=Redis.from_url(redis_url()), serializer=JSONSerializer)
    options: dict[str, Any] = {"result_ttl": RESULT_TTL, **({"retry": Retry(max=3)} if retry else {})}
    app = FastAPI()

    @app.get("/health")
    async def health() -> dict[str, str]:
        return HEALTH

    @app.post(f"/api/v1/incr/io/simple/{name}", status_code=ACCEPTED)
    def incr(task: Incr) -> dict[str, Any]:
        job_id = task.task_id.replace("_", "__").replace(".", "_d").replace(":", "_c")
        queue.enqueue("taskbench.backends.rq.floor.incr", task.value, job_id=job_id, unique=True, **options)
        return {"status": "accepted", "task_id": task.task_id}

    return app
