"""Dramatiq: the API enqueues through the Redis broker off its event loop; a Dramatiq Worker runs tasks.

Wiring (dramatiq 2.2), and why:
- ``RedisBroker`` with the namespace ``<run prefix>dramatiq``: every key Dramatiq creates (queues,
  acks, heartbeats, dead letters) is inside the run, and the harness deletes it;
- JSON encoder (Dramatiq's default, set explicitly); middleware chosen explicitly: no Prometheus
  middleware (it would start its own exporter on 0.0.0.0:9191; our metrics cover the tasks), no
  Results, bounded Retries, a TimeLimit of ``--task-timeout``;
- at-least-once: Dramatiq acks a message after the actor returned; a worker's unacked messages
  go back to the queue once its heartbeat is older than ``heartbeat_timeout`` (= ``--task-timeout``).
  That check runs as "maintenance" on a random share of broker commands; Dramatiq's default
  (1 in 1,000) leaves a dead worker's tasks stranded for minutes on an idle queue, so it runs on
  5 % of commands here;
- coroutines: the actor is a plain function run by Dramatiq's worker threads (``--concurrency`` of
  them); it hands the coroutine to the worker process's own event loop, which owns the Workloads'
  Redis clients, and waits. Dramatiq's AsyncIO middleware would run it on a second loop, where those
  clients cannot be used;
- ``broker.enqueue`` is blocking I/O: the API runs it on the shared producer thread pool
  (:mod:`._sync_producer`: ``--producer-threads``, bounded by ``--enqueue-timeout``) and answers once
  Redis has the message;
- SIGTERM/SIGINT stop the consumers and wait up to ``--stop-timeout`` for running actors.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

import dramatiq
from dramatiq.brokers.redis import RedisBroker
from dramatiq.encoder import JSONEncoder
from dramatiq.middleware import AgeLimit, Retries, ShutdownNotifications, TimeLimit

from taskbench.backends._sync_producer import SyncProducer, sync_producer
from taskbench.backends._worker import blocking_execute, stop_requested
from taskbench.backends.base import ServiceContext, WorkerContext
from taskbench.messages import TaskMessage

if TYPE_CHECKING:
    import redis.asyncio as aioredis
    from fastapi import BackgroundTasks

    from taskbench.settings import Settings

FUNCTION = "taskbench_execute"
QUEUE = "default"
#: Dramatiq's maintenance (requeueing a dead worker's messages) per million broker commands
MAINTENANCE_CHANCE = 50_000
MAX_RETRIES = 3


def namespace(settings: Settings) -> str:
    return f"{settings.prefix}dramatiq"


def make_broker(settings: Settings) -> RedisBroker:
    dramatiq.set_encoder(JSONEncoder())
    return RedisBroker(
        url=settings.broker_address,
        namespace=namespace(settings),
        heartbeat_timeout=int(settings.task_timeout * 1000),
        maintenance_chance=MAINTENANCE_CHANCE,
        middleware=[
            AgeLimit(),
            TimeLimit(time_limit=int(settings.task_timeout * 1000)),
            ShutdownNotifications(),
            Retries(max_retries=MAX_RETRIES, min_backoff=100, max_backoff=5_000),
        ],
    )


class _Producer:
    def __init__(self, broker: RedisBroker, threads: SyncProducer) -> None:
        self._broker = broker
        self._threads = threads

    async def enqueue(self, task: TaskMessage, later: BackgroundTasks) -> None:
        message = dramatiq.Message(queue_name=QUEUE, actor_name=FUNCTION, args=(task.to_dict(),), kwargs={},
                                   options={})
        await self._threads.run(functools.partial(self._broker.enqueue, message))


class DramatiqBackend:
    @asynccontextmanager
    async def producer(self, ctx: ServiceContext) -> AsyncIterator[_Producer]:
        broker = make_broker(ctx.settings)
        broker.declare_queue(QUEUE)
        try:
            async with sync_producer(ctx.settings, "dramatiq") as threads:
                yield _Producer(broker, threads)
        finally:
            broker.close()

    async def run_worker(self, ctx: WorkerContext) -> None:
        settings = ctx.settings
        broker = make_broker(settings)
        loop = asyncio.get_running_loop()
        execute = blocking_execute(ctx)

        def run(payload: dict[str, Any]) -> None:
            execute(payload)  # a Dramatiq worker thread: the task runs on the process's loop

        dramatiq.actor(run, actor_name=FUNCTION, queue_name=QUEUE, broker=broker, max_retries=MAX_RETRIES)
        worker = dramatiq.Worker(broker, worker_threads=settings.concurrency, worker_timeout=200)
        with stop_requested() as stopping:
            worker.start()
            try:
                await ctx.ready()
                await stopping.wait()
                # stop() joins threads whose actors need this loop to finish: wait for it elsewhere;
                # it gives up by itself after the stop timeout, leaving unfinished messages unacked
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(
                        loop.run_in_executor(None, worker.stop, int(settings.shutdown_timeout * 1000)),
                        settings.shutdown_timeout + 2,
                    )
            finally:
                broker.close()

    async def queue_depth(self, settings: Settings, redis: aioredis.Redis) -> int:
        # the queue's list of message ids not yet fetched
        return int(await redis.llen(f"{namespace(settings)}:{QUEUE}"))

    async def purge(self, settings: Settings) -> None:
        pass  # Redis only: the harness deletes the run's keys


backend = DramatiqBackend()
