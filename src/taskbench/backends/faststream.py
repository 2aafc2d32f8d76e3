"""FastStream: the API publishes to a Redis stream; workers consume it as a consumer group.

Wiring (FastStream 0.7), and why. The seed subscribed on Redis pub/sub: with no worker running every
message was lost, and with two workers every task ran twice. Here:
- a Redis stream named after the run, read through one consumer group by competing consumers, one
  consumer name per worker process: each message goes to one worker, and waits in the stream while
  no worker runs (the group is created from the stream's start by whichever process comes first;
  FastStream would create it at the end, skipping what was sent before the first worker);
- ``AckPolicy.NACK_ON_ERROR``: a message is acked after its handler returned, and stays pending when
  it raised or its worker died;
- a dead consumer's pending messages are claimed by a second subscriber of the same group that reads
  with XAUTOCLAIM (``min_idle_time`` = ``--task-timeout``); FastStream's single-command alternative,
  XREADGROUP's CLAIM option, needs Redis 8.4;
- ``max_workers`` = ``--concurrency`` tasks at once in one worker process; JSON messages (a dict);
- SIGTERM/SIGINT stop the subscribers and give running handlers ``graceful_timeout`` =
  ``--stop-timeout``; what is cut off stays pending and is claimed by another worker.
"""

from __future__ import annotations

import asyncio
import os
import signal
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

from faststream import AckPolicy
from faststream.redis import RedisBroker, StreamSub

from taskbench.backends.base import ServiceContext, WorkerContext
from taskbench.messages import TaskMessage

if TYPE_CHECKING:
    import redis.asyncio as aioredis
    from fastapi import BackgroundTasks

    from taskbench.settings import Settings

#: ms a subscriber blocks in XREADGROUP / sleeps between XAUTOCLAIM rounds
POLL_MS = 1000


def stream_name(settings: Settings) -> str:
    return f"{settings.prefix}faststream"


def _broker(settings: Settings) -> Any:
    return RedisBroker(settings.broker_address, graceful_timeout=settings.shutdown_timeout,
                       max_connections=settings.redis_max_connections, logger=None)


async def _ensure_group(settings: Settings) -> None:
    """Create the stream's group reading from its start, whoever comes first (API or worker).

    FastStream creates a missing group at the stream's end (``$``): tasks sent before the first worker
    started would never be delivered.
    """
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


class _Producer:
    def __init__(self, broker: Any, settings: Settings) -> None:
        self._broker = broker
        self._stream = stream_name(settings)

    async def enqueue(self, task: TaskMessage, later: BackgroundTasks) -> None:
        # XADD: returns once Redis appended the entry
        await self._broker.publish(task.to_dict(), stream=self._stream, correlation_id=task.task_id)


class FaststreamBackend:
    @asynccontextmanager
    async def producer(self, ctx: ServiceContext) -> AsyncIterator[_Producer]:
        await _ensure_group(ctx.settings)
        broker = _broker(ctx.settings)
        await broker.connect()
        try:
            yield _Producer(broker, ctx.settings)
        finally:
            await broker.stop()

    async def run_worker(self, ctx: WorkerContext) -> None:
        settings = ctx.settings
        broker = _broker(settings)
        execute = ctx.execute
        name, group, consumer = stream_name(settings), stream_name(settings), f"worker-{os.getpid()}"

        async def handle(payload: dict[str, Any]) -> None:
            await execute(TaskMessage.from_dict(payload))

        # new entries, and the entries a dead consumer left pending
        await _ensure_group(settings)
        fresh = StreamSub(name, group=group, consumer=consumer, polling_interval=POLL_MS)
        stale = StreamSub(name, group=group, consumer=consumer, polling_interval=POLL_MS,
                          min_idle_time=int(settings.task_timeout * 1000))
        for sub in (fresh, stale):
            broker.subscriber(stream=sub, max_workers=settings.concurrency,
                              ack_policy=AckPolicy.NACK_ON_ERROR)(handle)
        stopping = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stopping.set)
        try:
            await broker.start()
            await ctx.ready()
            await stopping.wait()
        finally:
            for sig in (signal.SIGTERM, signal.SIGINT):
                loop.remove_signal_handler(sig)
            await broker.stop()

    async def queue_depth(self, settings: Settings, redis: aioredis.Redis) -> int:
        name = stream_name(settings)
        groups: Any = await redis.xinfo_groups(name)
        return sum(int(g.get("lag") or 0) for g in groups if g["name"] in (name, name.encode()))

    async def purge(self, settings: Settings) -> None:
        pass  # Redis only for now: the harness deletes the run's keys


backend = FaststreamBackend()
