"""FastStream with seed 000's wiring: Redis pub/sub, **unsafe** for a task queue (backend ``faststream-pubsub``).

Seed 000 subscribed its task handler on a Redis pub/sub channel (``@broker.subscriber("send_email")``)
and published with ``broker.publish(..., channel="send_email")``. Pub/sub is a broadcast: every
subscriber gets every message, and a message published while no subscriber listens is dropped. So
with N worker processes each task runs N times (the article's author, in the comments: five workers
ran the 10 000 tasks five times), and a task enqueued while no worker runs is lost. Nothing is
acknowledged or redelivered.

This module reproduces that wiring so the duplication and the loss are *measured* by the ledger
(``extra_executions``, ``lost``), never assumed. It is never a default: ``--backends all`` leaves it
out, ``taskbench backends`` and every result mark it unsafe (``BackendInfo.unsafe``). Use the
``faststream`` backend (competing consumers on a Redis stream group) for anything else.

As in the seed, a worker handles one message at a time (``--concurrency`` 1, the article's FastStream
had no concurrency setting); a higher ``--concurrency`` gives the subscriber that many handlers
(``max_workers``, FastStream 0.5 and later). Redis only. It also runs on the article's FastStream 0.4.7
(``--versions article-000``), at concurrency 1 only: 0.4's subscriber handles one message at a time.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

from taskbench.backends.base import ServiceContext, WorkerContext
from taskbench.backends.faststream.backend import _broker, _Producer, consume, handler, stop

if TYPE_CHECKING:
    from taskbench.settings import Settings


def channel_name(settings: Settings) -> str:
    """The run's pub/sub channel (the seed's ``SEND_EMAIL_TOPIC``)."""
    return f"{settings.prefix}faststream-pubsub"


class _PubSubProducer(_Producer):
    """PUBLISH on the channel: Redis answers with the number of subscribers that got it, and keeps nothing."""

    def __init__(self, broker: Any, settings: Settings) -> None:
        super().__init__(broker, settings)
        self._target = {"channel": channel_name(settings)}


class FaststreamPubSubBackend:
    @asynccontextmanager
    async def producer(self, ctx: ServiceContext) -> AsyncIterator[_PubSubProducer]:
        broker = _broker(ctx.settings)
        await broker.connect()
        try:
            yield _PubSubProducer(broker, ctx.settings)
        finally:
            await stop(broker)

    async def run_worker(self, ctx: WorkerContext) -> None:
        settings = ctx.settings
        broker = _broker(settings)
        if settings.concurrency > 1 and not hasattr(broker, "stop"):  # FastStream 0.4: no max_workers
            import faststream

            raise ValueError(f"faststream-pubsub on FastStream {faststream.__version__} handles one message at a "
                             f"time (no max_workers before 0.5): --concurrency must be 1, not {settings.concurrency}")
        extra: dict[str, Any] = {"max_workers": settings.concurrency} if settings.concurrency > 1 else {}
        broker.subscriber(channel_name(settings), **extra)(handler(ctx))
        await consume(ctx, broker)  # SUBSCRIBE at start: from then on this worker gets every message

    async def purge(self, settings: Settings) -> None:
        """Nothing to delete: a channel holds no messages and no keys."""


backend = FaststreamPubSubBackend()
