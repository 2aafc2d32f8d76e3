"""What both variants of the example service share: the order, the arq pool in the app's lifespan."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from arq import create_pool
from arq.connections import RedisSettings
from fastapi import FastAPI
from pydantic import BaseModel

REDIS = RedisSettings.from_dsn(os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0"))
QUEUE = os.environ.get("ARQ_QUEUE", "arq:queue")


class Order(BaseModel):
    item: str
    quantity: int = 1


@asynccontextmanager
async def lifespan(app: FastAPI) -> AsyncIterator[None]:
    app.state.arq = await create_pool(REDIS, default_queue_name=QUEUE)
    yield
    await app.state.arq.aclose()
