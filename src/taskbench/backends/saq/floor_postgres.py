"""Floor of ``saq-postgres``: ``await queue.enqueue(...)`` on SAQ's ``PostgresQueue`` (JSON, the backend's
job options), opened for the app's lifetime.

The broker is ``TASKBENCH_BROKER_URL`` (PostgreSQL); every connection's ``search_path`` is the run's
schema, where ``taskbench prepare`` ran SAQ's migrations, and the queue name and advisory-lock keyspace
are the run's, all as ``taskbench.backends._postgres`` and ``taskbench.backends.saq.backend_postgres`` name them
(repeated here: a floor imports no taskbench code beyond ``_common``).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI, Request
from psycopg_pool import AsyncConnectionPool
from saq.queue.postgres import PostgresQueue

from taskbench.backends._floor import ACCEPTED, HEALTH, Incr, broker_url, run_id
from taskbench.backends._floor import postgres_schema as _schema

#: the backend's job options (seconds, attempts): they are part of what SAQ stores per job
TIMEOUT = 60
RETRIES = 1  # SAQ's default, and --option saq.retries's


def _keyspace(run: str) -> int:
    return int.from_bytes(hashlib.sha256(run.encode()).digest()[:4], "big", signed=True)


def create_app() -> FastAPI:
    run = run_id()
    broker = broker_url()

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[dict[str, Any]]:
        pool: AsyncConnectionPool[Any] = AsyncConnectionPool(
            broker, open=False, min_size=4, max_size=64,
            kwargs={"autocommit": True, "options": f"-c search_path={_schema(run)}"},
            check=AsyncConnectionPool.check_connection)  # as SAQ's own pool (PostgresQueue.from_url)
        queue = PostgresQueue(pool, name=f"tb-{run}", dump=json.dumps, load=json.loads,
                              saq_lock_keyspace=_keyspace(run), min_size=4, max_size=64,
                              manage_pool_lifecycle=True)
        await queue.connect()
        try:
            yield {"queue": queue}
        finally:
            await queue.disconnect()

    app = FastAPI(lifespan=lifespan)

    @app.get("/health")
    async def health() -> dict[str, str]:
        return HEALTH

    @app.post("/api/v1/incr/io/simple/saq-postgres", status_code=ACCEPTED)
    async def incr(task: Incr, request: Request) -> dict[str, str]:
        queue: PostgresQueue = request.state.queue
        await queue.enqueue("incr", key=f"{run}:{task.task_id}", timeout=TIMEOUT, heartbeat=TIMEOUT,
                            retries=RETRIES, ttl=-1, value=task.value)
        return {"status": "accepted", "task_id": task.task_id}

    return app
