"""The seed's Store, done with a lifespan: every client the API needs, opened once, closed once."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any

from fastapi import Depends, Request

from taskbench import backends
from taskbench.backends.base import ServiceContext
from taskbench.brokers import durability
from taskbench.brokers.durability import Durability
from taskbench.ledger.pipe import pipe_for
from taskbench.metrics import EnqueueMetrics, enqueue_metrics
from taskbench.service.broker import BrokerProbe
from taskbench.service.claims import CONNECTIONS, Claims
from taskbench.service.deadlines import Deadlines
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
    broker: BrokerProbe
    #: the answer's ``durable``: the backend, the enqueue mode and the broker's configuration
    durability: Durability
    #: the API's claims of task ids; None when idempotency is off or the library remembers ids itself
    claims: Claims | None = None
    #: the enqueues' deadlines (one sweep, no timer per request)
    deadlines: Deadlines
    #: a request may leave work to run after its response: the enqueue (``after-response``), or the
    #: task itself (the in-process backend)
    runs_after_response: bool = True

    @property
    def backend_has_broker(self) -> bool:
        """False for the in-process backend: its tasks never touch a broker."""
        return backends.info(self.settings.backend).has_worker


@asynccontextmanager
async def open_store(settings: Settings) -> AsyncIterator[Store]:
    backend = backends.load(settings.backend)
    async with Workloads(settings) as workloads:
        ctx = ServiceContext(settings=settings, workloads=workloads)
        async with backend.producer(ctx) as producer, _broker_redis(settings, workloads) as redis, \
                _claims(settings, workloads) as claims:
            probe = BrokerProbe(settings=settings, redis=redis, producer=producer)
            meta = backends.info(settings.backend)
            found = durability.of_case(meta.durable, settings.enqueue_mode, await probe.durability(),
                                       unsafe=meta.unsafe)
            deadlines = Deadlines()
            try:
                yield Store(settings=settings, backend=backend, producer=producer, workloads=workloads,
                            enqueue_metrics=enqueue_metrics(settings.backend), broker=probe, durability=found,
                            claims=claims, deadlines=deadlines,
                            runs_after_response=settings.enqueue_mode == "after-response" or not meta.has_worker)
            finally:
                deadlines.close()


@asynccontextmanager
async def _claims(settings: Settings, workloads: Workloads) -> AsyncIterator[Claims | None]:
    """The claims on the run's Redis, unless idempotency is off or the library refuses a known id for
    the whole run by itself and the API hears of it (awaited enqueue; after the response it cannot)."""
    native = backends.info(settings.backend).remembers_ids and settings.enqueue_mode == "awaited"
    if not settings.idempotency or native:
        yield None
        return
    # a connection of their own, pipelined (taskbench.ledger.pipe: a claim is one call on each request's
    # path); redis-py, a plain pool of as many connections as the claims make calls at once, where the
    # pipe does not speak the URL (TLS)
    pipe = pipe_for(settings.redis_url)
    if pipe is not None:
        try:
            async with Claims(pipe.submit, settings) as claims:
                yield claims
        finally:
            await pipe.aclose()
        return
    import redis.asyncio as aioredis

    client = aioredis.Redis.from_url(settings.redis_url, max_connections=CONNECTIONS)
    try:
        async with Claims(client.execute_command, settings) as claims:
            yield claims
    finally:
        await client.aclose()


@asynccontextmanager
async def _broker_redis(settings: Settings, workloads: Workloads) -> AsyncIterator[Any]:
    """A client of the broker's Redis for /health and its configuration: the ledger's client when
    they share a server (or the broker is not Redis)."""
    if not settings.own_broker_redis:
        yield workloads.redis
        return
    import redis.asyncio as aioredis

    client = aioredis.Redis.from_url(settings.broker_address, socket_timeout=5, socket_connect_timeout=5)
    try:
        yield client
    finally:
        await client.aclose()


async def get_store(request: Request) -> Store:
    # async on purpose: FastAPI runs a plain ``def`` dependency in its thread pool, a thread hop
    # per request that cost this API about 60 % of its throughput
    store: Store = request.state.store
    return store


StoreDep = Annotated[Store, Depends(get_store)]
