"""Taskiq: the API kicks tasks into a Redis stream; a Taskiq receiver in the worker runs them.

Wiring (taskiq 0.13, taskiq-redis 1.2), and why:
- taskiq-redis's ``RedisStreamBroker`` (a stream read through a consumer group), not the list or
  pub/sub brokers: a message is delivered to one consumer and stays pending until it is acked;
- the stream, the consumer group and so the reclaim lock (``autoclaim:<group>:<stream>``, listed in
  the registry) are named after the run; each worker process is a consumer of its own name;
- JSON serializer (taskiq's default, set explicitly); no result backend: the ledger records runs;
- at-least-once: the receiver acks ``WHEN_EXECUTED``, after the task returned (taskiq's default acks
  when the result is saved, which with no result backend is the same moment, but it is stated here);
  a dead consumer's pending messages are claimed (XAUTOCLAIM) by another worker once idle for
  ``--task-timeout``. taskiq-redis only tries that after a read that returned new messages, so on an
  idle queue a dead worker's tasks were never re-run: ``_StreamBroker.listen`` reclaims after every
  read, including empty ones;
- the group is created reading from the start of the stream (``consumer_id="0"``), so tasks sent
  before any worker started are delivered too;
- RabbitMQ (``--broker rabbitmq``, taskiq-aio-pika 0.6): an exchange, a quorum queue and a dead-letter
  queue named after the run, persistent messages on a publisher-confirm channel, ``qos`` =
  ``--concurrency``; a dead worker's unacked messages are redelivered when its connection closes;
- concurrency: ``max_async_tasks`` = ``--concurrency``; SIGTERM/SIGINT stop fetching and wait up to
  ``--stop-timeout`` for running tasks (``wait_tasks_timeout``).
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncGenerator, AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

from redis.asyncio import Redis
from taskiq import AckableMessage, AsyncBroker
from taskiq.acks import AcknowledgeType
from taskiq.kicker import AsyncKicker
from taskiq.receiver import Receiver
from taskiq.serializers import JSONSerializer
from taskiq_redis import RedisStreamBroker

from taskbench.backends._redis import reconnecting
from taskbench.backends._wiring import pick
from taskbench.backends._worker import stop_requested
from taskbench.backends.base import ServiceContext, WorkerContext
from taskbench.messages import TaskMessage

if TYPE_CHECKING:
    import redis.asyncio as aioredis
    from fastapi import BackgroundTasks

    from taskbench.settings import Settings

FUNCTION = "taskbench_execute"
#: ms a worker blocks in XREADGROUP before it looks for a dead consumer's messages again
BLOCK_MS = 1000


def stream_name(settings: Settings) -> str:
    return f"{settings.prefix}taskiq"


class _StreamBroker(RedisStreamBroker):  # type: ignore[misc,unused-ignore]
    """taskiq-redis's stream broker, reclaiming idle messages after every read, not only busy ones."""

    async def listen(self) -> AsyncGenerator[AckableMessage, None]:
        async with Redis(connection_pool=self.connection_pool) as redis_conn:
            while True:
                fetched: Any = await redis_conn.xreadgroup(
                    self.consumer_group_name, self.consumer_name, {self.queue_name: ">"},
                    block=self.block, noack=False, count=self.count,
                )
                for stream, entries in fetched or []:
                    for entry_id, fields in entries:
                        yield AckableMessage(data=fields[b"data"], ack=self._ack_generator(entry_id, stream))
                reclaimed: Any = await redis_conn.xautoclaim(
                    self.queue_name, self.consumer_group_name, self.consumer_name,
                    min_idle_time=self.idle_timeout, count=self.unacknowledged_batch_size,
                )
                for entry_id, fields in reclaimed[1]:
                    if fields:  # an entry deleted meanwhile comes back empty
                        yield AckableMessage(data=fields[b"data"],
                                             ack=self._ack_generator(entry_id, self.queue_name))


def _rabbit_names(settings: Settings) -> tuple[str, str, str]:
    """Exchange, queue and dead-letter queue of the run on RabbitMQ."""
    base = stream_name(settings)
    return base, base, f"{base}.dead_letter"


class _Wiring:
    """Taskiq on one broker: its broker class, how its queue is counted, what a purge deletes."""

    def broker(self, settings: Settings, *, worker: bool) -> AsyncBroker:
        raise NotImplementedError

    async def queue_depth(self, settings: Settings, redis: aioredis.Redis) -> int:
        raise NotImplementedError("queue depth is read on Redis only")

    async def purge(self, settings: Settings) -> None:
        """Nothing to delete: the harness deletes the run's keys."""


class _OnRedis(_Wiring):
    def broker(self, settings: Settings, *, worker: bool) -> AsyncBroker:
        broker = _StreamBroker(
            url=settings.broker_address,
            queue_name=stream_name(settings),
            consumer_group_name=stream_name(settings),
            consumer_name=f"worker-{os.getpid()}",
            consumer_id="0",
            xread_block=BLOCK_MS,
            idle_timeout=int(settings.task_timeout * 1000),
            max_connection_pool_size=settings.redis_max_connections,
            **(reconnecting() if worker else {}),
        )
        streamed: AsyncBroker = broker.with_serializer(JSONSerializer())
        return streamed

    async def queue_depth(self, settings: Settings, redis: aioredis.Redis) -> int:
        # entries the group has not delivered yet (Redis 7's XINFO GROUPS "lag")
        name = stream_name(settings)
        groups = await redis.xinfo_groups(name)
        return sum(int(g.get("lag") or 0) for g in groups if g["name"] in (name, name.encode()))


class _OnRabbitMQ(_Wiring):
    def broker(self, settings: Settings, *, worker: bool) -> AsyncBroker:
        from taskiq_aio_pika import AioPikaBroker, Exchange, Queue

        exchange, queue, dead = _rabbit_names(settings)
        # quorum queues (taskiq-aio-pika's default) keep every message on disk; messages are
        # persistent and published on a confirming channel, so kiq() returns once RabbitMQ has it
        rabbit = AioPikaBroker(
            url=settings.broker_address,
            qos=settings.concurrency,
            exchange=Exchange(name=exchange),
            task_queues=[Queue(name=queue)],
            dead_letter_queue=Queue(name=dead),
        )
        result: AsyncBroker = rabbit.with_serializer(JSONSerializer())
        return result

    async def purge(self, settings: Settings) -> None:
        import aio_pika

        connection = await aio_pika.connect(settings.broker_address)
        async with connection:
            channel = await connection.channel()
            exchange, queue, dead = _rabbit_names(settings)
            for name in (queue, dead):
                await channel.queue_delete(name)
            await channel.exchange_delete(exchange)


_WIRINGS: dict[str, _Wiring] = {"redis": _OnRedis(), "rabbitmq": _OnRabbitMQ()}


def _wiring(settings: Settings) -> _Wiring:
    return pick(_WIRINGS, settings.broker, "taskiq")


def make_broker(settings: Settings, *, worker: bool = False) -> AsyncBroker:
    """The run's broker; a ``worker``'s Redis connections retry through a broker restart (a lost
    connection, a Redis still loading its AOF), where the API's keep redis-py's defaults."""
    return _wiring(settings).broker(settings, worker=worker)


class _Producer:
    def __init__(self, broker: AsyncBroker) -> None:
        self._kicker: AsyncKicker[Any, Any] = AsyncKicker(task_name=FUNCTION, broker=broker, labels={})

    async def enqueue(self, task: TaskMessage, later: BackgroundTasks) -> None:
        await self._kicker.with_task_id(task.task_id).kiq(task.to_dict())


class TaskiqBackend:
    @asynccontextmanager
    async def producer(self, ctx: ServiceContext) -> AsyncIterator[_Producer]:
        broker = make_broker(ctx.settings)
        await broker.startup()
        try:
            yield _Producer(broker)
        finally:
            await broker.shutdown()

    async def run_worker(self, ctx: WorkerContext) -> None:
        settings = ctx.settings
        broker = make_broker(settings, worker=True)
        execute = ctx.execute

        async def run(payload: dict[str, Any]) -> None:
            await execute(TaskMessage.from_dict(payload))

        broker.register_task(run, task_name=FUNCTION)
        broker.is_worker_process = True
        await broker.startup()
        receiver = Receiver(
            broker,
            max_async_tasks=settings.concurrency,
            run_startup=False,
            ack_type=AcknowledgeType.WHEN_EXECUTED,
            wait_tasks_timeout=settings.shutdown_timeout,
        )
        with stop_requested() as finish:
            try:
                listening = asyncio.create_task(receiver.listen(finish))
                await ctx.ready()
                await listening
            finally:
                await broker.shutdown()

    async def queue_depth(self, settings: Settings, redis: aioredis.Redis) -> int:
        return await _wiring(settings).queue_depth(settings, redis)

    async def purge(self, settings: Settings) -> None:
        """Delete the run's exchange and queues on RabbitMQ (on Redis the harness deletes the keys)."""
        await _wiring(settings).purge(settings)


backend = TaskiqBackend()
