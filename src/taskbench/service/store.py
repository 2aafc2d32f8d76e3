"""The seed's Store, done with a lifespan: every client the API needs, opened once, closed once."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated

from fastapi import Depends, Request

from taskbench import backends
from taskbench.backends.base import ServiceContext
from taskbench.metrics import EnqueueMetrics, enqueue_metrics
from taskbench.service.claims import Claims
from taskbench.workloads import Workloads

if TYPE_CHECKING:
    from taskbench.backends.base import Backend, Producer
    from taskbench.settings import Settings


@dataclass(frozen=True, kw_only=True)
class Store:
    settings: Settings
    backend: Backend
    producer: Producer
    workloads: Workloads
    enqueue_metrics: EnqueueMetrics
    #: the API's claims of task ids; None when idempotency is off or the library remembers ids itself
    claims: Claims | None = None


@asynccontextmanager
async def open_store(settings: Settings) -> AsyncIterator[Store]:
    backend = backends.load(settings.backend)
    async with Workloads(settings) as workloads:
        ctx = ServiceContext(settings=settings, workloads=workloads)
        async with backend.producer(ctx) as producer, _claims(settings, workloads) as claims:
            yield Store(settings=settings, backend=backend, producer=producer, workloads=workloads,
                        enqueue_metrics=enqueue_metrics(settings.backend), claims=claims)


@asynccontextmanager
async def _claims(settings: Settings, workloads: Workloads) -> AsyncIterator[Claims | None]:
    """The claims on the run's Redis, unless idempotency is off or the library refuses a known id for
    the whole run by itself and the API hears of it (awaited enqueue; after the response it cannot)."""
    native = backends.info(settings.backend).remembers_ids and settings.enqueue_mode == "awaited"
    if not settings.idempotency or native:
        yield None
        return
    async with Claims(workloads.redis, settings) as claims:
        yield claims


async def get_store(request: Request) -> Store:
    # async on purpose: FastAPI runs a plain ``def`` dependency in its thread pool, a thread hop
    # per request that cost this API about 60 % of its throughput
    store: Store = request.state.store
    return store


StoreDep = Annotated[Store, Depends(get_store)]
