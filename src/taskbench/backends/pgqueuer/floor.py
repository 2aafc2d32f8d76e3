"""Floor of ``pgqueuer``: ``await queries.enqueue(...)`` on ``Queries(AsyncpgPoolDriver(pool))``, as PgQueuer's
FastAPI example does (JSON bytes, the task id as ``dedupe_key``, the run's schema and channel).

The broker is ``TASKBENCH_BROKER_URL`` (a ``postgresql://`` URL); the schema is the run's, named as
``taskbench.backends._postgres.schema`` names it, installed beforehand by ``taskbench prepare``.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import asyncpg
from fastapi import FastAPI, Request
from pgqueuer.adapters.persistence.qb import QueryBuilderEnvironment, QueryQueueBuilder, QuerySchedulerBuilder
from pgqueuer.db import AsyncpgPoolDriver
from pgqueuer.domain.settings import DBSettings
from pgqueuer.models import Channel
from pgqueuer.queries import Queries

from taskbench.backends._floor import ACCEPTED, HEALTH, Incr, broker_url, run_id
from taskbench.backends._floor import postgres_schema as schema

#: as the SAQ floor's function: not the backend's entrypoint, so no worker of the run takes these jobs
ENTRYPOINT = "incr"


def create_app() -> FastAPI:
    names = schema(run_id())
    settings = DBSettings(db_schema=names, channel=Channel(names), prefix="")

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[dict[str, Any]]:
        # the backend's pool (2 to 64 connections): asyncpg's default of 10 would queue 100 users' enqueues
        async with asyncpg.create_pool(broker_url(), min_size=2, max_size=64,
                                       server_settings={"search_path": names}) as pool:
            yield {"queries": Queries(AsyncpgPoolDriver(pool), qbe=QueryBuilderEnvironment(settings),
                                      qbq=QueryQueueBuilder(settings), qbs=QuerySchedulerBuilder(settings))}

    app = FastAPI(lifespan=lifespan)

    @app.get("/health")
    async def health() -> dict[str, str]:
        return HEALTH

    @app.post("/api/v1/incr/io/simple/pgqueuer", status_code=ACCEPTED)
    async def incr(task: Incr, request: Request) -> dict[str, str]:
        queries: Queries = request.state.queries
        await queries.enqueue(ENTRYPOINT, json.dumps({"value": task.value}).encode(), dedupe_key=task.task_id)
        return {"status": "accepted", "task_id": task.task_id}

    return app
