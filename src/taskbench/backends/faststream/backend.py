"""FastStream: competing consumers on a Redis stream group, a RabbitMQ queue or a NATS JetStream consumer.

Wiring (FastStream 0.7), and why. The seed subscribed on Redis pub/sub: with no worker running every
message was lost, and with two workers every task ran twice. Here every broker delivers each message
to one worker, keeps it while no worker runs, and takes it back from a worker that died:

- **Redis** (default): a stream named after the run, read by one consumer group, one consumer name per
  worker process; the group is created from the stream's start by whichever process comes first
  (FastStream would create it at the end, skipping what was sent before the first worker). A dead
  consumer's pending entries are claimed by a second subscriber of the same group reading with
  XAUTOCLAIM (``min_idle_time`` = ``--task-timeout``); FastStream's one-command alternative,
  XREADGROUP's CLAIM option, needs Redis 8.4. ``max_workers`` = ``--concurrency``, and so is each
  read's ``max_records`` (XREADGROUP's COUNT): unbounded, a backlog sat in the consumer's pending list
  until the XAUTOCLAIM took it for a dead consumer's and ran it twice.
- **RabbitMQ** (``--broker rabbitmq``): a quorum queue named after the run, declared by the API before
  it publishes (a message published to a missing queue is dropped), persistent messages on a
  publisher-confirm channel, ``prefetch_count`` = ``--concurrency``; a dead worker's unacked
  messages are redelivered when its connection closes.
- **NATS** (``--broker nats``): a JetStream stream and subject named after the run, created by the API
  or the first worker; publishing waits for JetStream's ack; one durable pull consumer shared by the
  workers, ``ack_wait`` = ``--task-timeout`` so a dead worker's message is redelivered.

On every broker, ``AckPolicy.NACK_ON_ERROR``: a message is acked after its handler returned and stays
unacknowledged when it raised or its worker died. Messages are JSON. SIGTERM/SIGINT stop the
subscribers and give running handlers ``graceful_timeout`` = ``--stop-timeout``.
"""

from __future__ import annotations

import asyncio
import os
import re
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

from taskbench.backends._wiring import pick
from taskbench.backends._worker import stop_requested
from taskbench.backends.base import ServiceContext, WorkerContext
from taskbench.messages import TaskMessage

if TYPE_CHECKING:
    import redis.asyncio as aioredis
    from fastapi import BackgroundTasks

    from taskbench.settings import Settings

#: ms a Redis subscriber blocks in XREADGROUP / sleeps between XAUTOCLAIM rounds
POLL_MS = 1000
Handler = Callable[[dict[str, Any]], Awaitable[None]]


def stream_name(settings: Settings) -> str:
    return f"{settings.prefix}faststream"


def _nats_names(settings: Settings) -> tuple[str, str]:
    """JetStream stream (letters, digits, - and _ only) and subject of the run."""
    token = re.sub(r"[^A-Za-z0-9_-]", "_", settings.run_id)
    return f"taskbench-{token}-faststream", f"taskbench.{token}.faststream"


class _Wiring:
    """FastStream on one broker: its broker class, where a task is published and read, how the queue is
    counted and what a purge deletes."""

    def broker(self, settings: Settings, common: dict[str, Any]) -> Any:
        raise NotImplementedError

    async def declare(self, settings: Settings, broker: Any) -> None:
        """Make sure the destination exists before anything is published or consumed."""
        raise NotImplementedError

    def subscribe(self, settings: Settings, broker: Any, handle: Handler, common: dict[str, Any]) -> None:
        raise NotImplementedError

    def target(self, settings: Settings) -> dict[str, Any]:
        """``publish``'s keywords that name the destination."""
        raise NotImplementedError

    def publish_slots(self, settings: Settings) -> int | None:
        """How many publishes may be in flight at once (None: no bound)."""
        return None

    async def queue_depth(self, settings: Settings, redis: aioredis.Redis) -> int:
        raise NotImplementedError("queue depth is read on Redis only")

    async def purge(self, settings: Settings) -> None:
        """Nothing to delete: the harness deletes the run's keys."""


class _OnRedis(_Wiring):
    """A stream and its consumer group, named after the run."""

    def broker(self, settings: Settings, common: dict[str, Any]) -> Any:
        from faststream.redis import RedisBroker

        return RedisBroker(settings.broker_address, max_connections=settings.redis_max_connections, **common)

    async def declare(self, settings: Settings, broker: Any) -> None:
        import redis.asyncio as aioredis
        from redis.exceptions import ResponseError

        client = aioredis.Redis.from_url(settings.broker_address)
        try:
            await client.xgroup_create(stream_name(settings), stream_name(settings), id="0", mkstream=True)
        except ResponseError as exc:
            if "BUSYGROUP" not in str(exc):
                raise
        finally:
            await client.aclose()

    def subscribe(self, settings: Settings, broker: Any, handle: Handler, common: dict[str, Any]) -> None:
        from faststream.redis import StreamSub

        name, consumer = stream_name(settings), f"worker-{os.getpid()}"
        # XREADGROUP's COUNT: FastStream's default (None) reads every entry there is into this consumer's
        # pending list, where those waiting behind the running ones age past min_idle_time and the stale
        # subscriber claims and runs them again (a backlog of 200 half-second tasks at concurrency 1:
        # 79 ran twice, no fault; docs/results.md, seed 000 row 20). Reading `concurrency` at a time keeps
        # a task's wait in the pending list to a few task durations.
        fresh = StreamSub(name, group=name, consumer=consumer, polling_interval=POLL_MS,
                          max_records=settings.concurrency)
        stale = StreamSub(name, group=name, consumer=consumer, polling_interval=POLL_MS,
                          min_idle_time=int(settings.task_timeout * 1000))
        for sub in (fresh, stale):
            broker.subscriber(stream=sub, max_workers=settings.concurrency, **common)(handle)

    def target(self, settings: Settings) -> dict[str, Any]:
        return {"stream": stream_name(settings)}  # XADD

    def publish_slots(self, settings: Settings) -> int | None:
        # FastStream's RedisBroker builds redis-py's plain ConnectionPool, which raises
        # MaxConnectionsError ("Too many connections") instead of waiting when more publishes are in
        # flight than it has connections: with --enqueue-mode after-response (nothing holds the client
        # back) that lost accepted tasks. A publish waits for a free slot instead, inside the API's
        # enqueue deadline. Two connections stay free for /health's ping.
        return settings.redis_max_connections - 2

    async def queue_depth(self, settings: Settings, redis: aioredis.Redis) -> int:
        name = stream_name(settings)
        groups: Any = await redis.xinfo_groups(name)
        return sum(int(g.get("lag") or 0) for g in groups if g["name"] in (name, name.encode()))


class _OnRabbitMQ(_Wiring):
    """A quorum queue named after the run, declared before anything is published to it."""

    def broker(self, settings: Settings, common: dict[str, Any]) -> Any:
        from faststream.rabbit import RabbitBroker

        return RabbitBroker(settings.broker_address, **common)

    def _queue(self, settings: Settings) -> Any:
        from faststream.rabbit import QueueType, RabbitQueue

        return RabbitQueue(stream_name(settings), queue_type=QueueType.QUORUM, durable=True)

    async def declare(self, settings: Settings, broker: Any) -> None:
        await broker.declare_queue(self._queue(settings))

    def subscribe(self, settings: Settings, broker: Any, handle: Handler, common: dict[str, Any]) -> None:
        from faststream.rabbit import Channel

        broker.subscriber(self._queue(settings), channel=Channel(prefetch_count=settings.concurrency),
                          **common)(handle)

    def target(self, settings: Settings) -> dict[str, Any]:
        return {"queue": self._queue(settings), "persist": True}

    async def purge(self, settings: Settings) -> None:
        import aio_pika

        connection = await aio_pika.connect(settings.broker_address)
        async with connection:
            channel = await connection.channel()
            await channel.queue_delete(stream_name(settings))


class _OnNats(_Wiring):
    """A JetStream stream and subject named after the run, read by one durable pull consumer."""

    def broker(self, settings: Settings, common: dict[str, Any]) -> Any:
        from faststream.nats import NatsBroker

        return NatsBroker(settings.broker_address, **common)

    async def declare(self, settings: Settings, broker: Any) -> None:
        import nats

        name, subject = _nats_names(settings)
        client = await nats.connect(settings.broker_address)
        try:
            await client.jetstream().add_stream(name=name, subjects=[subject])  # same config: a no-op
        finally:
            await client.close()

    def subscribe(self, settings: Settings, broker: Any, handle: Handler, common: dict[str, Any]) -> None:
        from faststream.nats import JStream, PullSub
        from nats.js.api import ConsumerConfig

        name, subject = _nats_names(settings)
        broker.subscriber(
            subject, stream=JStream(name, subjects=[subject]), durable="workers",
            pull_sub=PullSub(batch_size=settings.concurrency),
            config=ConsumerConfig(ack_wait=settings.task_timeout, max_ack_pending=-1),
            max_workers=settings.concurrency, **common,
        )(handle)

    def target(self, settings: Settings) -> dict[str, Any]:
        name, subject = _nats_names(settings)
        return {"subject": subject, "stream": name}  # waits for JetStream's ack

    async def purge(self, settings: Settings) -> None:
        import nats
        from nats.js.errors import NotFoundError

        client = await nats.connect(settings.broker_address)
        try:
            await client.jetstream().delete_stream(_nats_names(settings)[0])
        except NotFoundError:
            pass
        finally:
            await client.close()


_WIRINGS: dict[str, _Wiring] = {"redis": _OnRedis(), "rabbitmq": _OnRabbitMQ(), "nats": _OnNats()}


def _wiring(settings: Settings) -> _Wiring:
    return pick(_WIRINGS, settings.broker, "faststream")


def _broker(settings: Settings) -> Any:
    common: dict[str, Any] = {"graceful_timeout": settings.shutdown_timeout, "logger": None}
    return _wiring(settings).broker(settings, common)


def _subscribe(settings: Settings, broker: Any, handle: Handler) -> None:
    from faststream import AckPolicy

    _wiring(settings).subscribe(settings, broker, handle, {"ack_policy": AckPolicy.NACK_ON_ERROR})


class _Producer:
    def __init__(self, broker: Any, settings: Settings) -> None:
        self._broker = broker
        wiring = _wiring(settings)
        limit = wiring.publish_slots(settings)
        self._slots = asyncio.Semaphore(limit) if limit else None
        self._target: dict[str, Any] = wiring.target(settings)

    async def enqueue(self, task: TaskMessage, later: BackgroundTasks) -> None:
        if self._slots is None:
            await self._broker.publish(task.to_dict(), correlation_id=task.task_id, **self._target)
            return
        async with self._slots:
            await self._broker.publish(task.to_dict(), correlation_id=task.task_id, **self._target)

    async def check_broker(self) -> None:
        """``/health``: FastStream's own ``ping`` over the producer's connection (Redis, RabbitMQ, NATS); FastStream
        0.4 (seed 000's, the pinned environment ``article-000``) has none: a Redis PING on its connection."""
        ping = getattr(self._broker, "ping", None)
        if ping is None:
            await asyncio.wait_for(self._broker._connection.ping(), timeout=0.9)
        elif not await ping(timeout=0.9):
            raise ConnectionError("FastStream's broker.ping got no answer")


def handler(ctx: WorkerContext) -> Handler:
    """The subscriber's handler: the message's JSON back to a task, run by the worker's ``execute``."""
    execute = ctx.execute

    async def handle(payload: dict[str, Any]) -> None:
        await execute(TaskMessage.from_dict(payload))

    return handle


async def consume(ctx: WorkerContext, broker: Any, prepare: Callable[[], Awaitable[None]] | None = None) -> None:
    """Connect, ``prepare`` (declare what the subscribers read), start the subscribers, report ready, and
    run until SIGTERM/SIGINT; then stop the broker (running handlers get ``graceful_timeout``)."""
    with stop_requested() as stopping:
        try:
            await broker.connect()
            if prepare is not None:
                await prepare()
            await broker.start()
            await ctx.ready()
            await stopping.wait()
        finally:
            await stop(broker)


async def stop(broker: Any) -> None:
    """Stop the subscribers and close the connection: ``stop()`` since FastStream 0.5, ``close()`` in 0.4."""
    await (broker.stop() if hasattr(broker, "stop") else broker.close())


class FaststreamBackend:
    @asynccontextmanager
    async def producer(self, ctx: ServiceContext) -> AsyncIterator[_Producer]:
        broker = _broker(ctx.settings)
        await broker.connect()
        try:
            await _wiring(ctx.settings).declare(ctx.settings, broker)
            yield _Producer(broker, ctx.settings)
        finally:
            await stop(broker)

    async def run_worker(self, ctx: WorkerContext) -> None:
        broker = _broker(ctx.settings)
        _subscribe(ctx.settings, broker, handler(ctx))
        await consume(ctx, broker, prepare=lambda: _wiring(ctx.settings).declare(ctx.settings, broker))

    async def queue_depth(self, settings: Settings, redis: aioredis.Redis) -> int:
        return await _wiring(settings).queue_depth(settings, redis)

    async def purge(self, settings: Settings) -> None:
        """Delete the run's RabbitMQ queue or JetStream stream (on Redis the harness deletes the keys)."""
        await _wiring(settings).purge(settings)


backend = FaststreamBackend()
