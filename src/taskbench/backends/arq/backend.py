"""ARQ: producer enqueues into a Redis sorted set; a separate arq Worker runs the tasks.

Wiring, following arq's documentation:
- msgpack job serialization on both sides (arq's default is pickle);
- the task id becomes arq's ``_job_id``: ``enqueue_job`` returns None, and the producer raises
  DuplicateTask, while a job of that id is queued or running or its result is kept (WATCH on the job
  key, so concurrent enqueues of one id give one job);
- results: with ``idempotency`` on, kept for ``REMEMBER_IDS`` so that arq refuses a finished id too
  (its result key is what it checks); off, not stored (``keep_result=0``). Not
  ``keep_result_forever``: arq 0.28 writes a failed job's result with ``PX 0`` then, which Redis
  refuses. The ledger, not arq's results, records executions;
- SIGTERM stops picking jobs and waits up to ``shutdown_timeout`` for running ones
  (``job_completion_wait``); a job whose worker dies is retried once its in-progress key expires
  (``job_timeout`` = ``task_timeout``), up to ``max_tries``.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

import msgpack
from arq import Worker, create_pool
from arq.connections import ArqRedis, RedisSettings

from taskbench.backends._redis import reconnecting
from taskbench.backends.base import DuplicateTask, ServiceContext, WorkerContext
from taskbench.messages import TaskMessage

if TYPE_CHECKING:
    import redis.asyncio as aioredis
    from fastapi import BackgroundTasks

    from taskbench.settings import Settings

FUNCTION = "taskbench_execute"
#: how long arq keeps a finished job's result, and so refuses its id again: longer than any run
REMEMBER_IDS = 30 * 86_400

_serialize = msgpack.packb
_deserialize = functools.partial(msgpack.unpackb, raw=False)


def queue_name(settings: Settings) -> str:
    return f"{settings.prefix}arq:queue"


def _job_id(settings: Settings, task_id: str) -> str:
    return f"{settings.run_id}:{task_id}"


async def _open_pool(settings: Settings) -> ArqRedis:
    return await create_pool(
        RedisSettings.from_dsn(settings.broker_address),
        job_serializer=_serialize,
        job_deserializer=_deserialize,
        default_queue_name=queue_name(settings),
    )


def _worker_redis(settings: Settings) -> RedisSettings:
    """The worker's connection, retrying a lost one with backoff (arq's RedisSettings hands ``retry``
    and ``retry_on_error`` to redis-py): without them arq's worker exits on the first ConnectionError
    of its poll loop, so a broker restart stops every worker. arq 0.25 (seed 000's version, the pinned
    environment ``article-000``) has neither field: its worker keeps that behaviour, as the article's did."""
    redis_settings = RedisSettings.from_dsn(settings.broker_address)
    if "retry_on_error" not in {f.name for f in dataclasses.fields(RedisSettings)}:
        return redis_settings
    return dataclasses.replace(redis_settings, **reconnecting())


class _Producer:
    def __init__(self, pool: ArqRedis, settings: Settings) -> None:
        self._pool = pool
        self._settings = settings

    async def enqueue(self, task: TaskMessage, later: BackgroundTasks) -> None:
        job = await self._pool.enqueue_job(
            FUNCTION, task.to_dict(), _job_id=_job_id(self._settings, task.task_id)
        )
        if job is None:  # queued, running, or finished with its result kept
            raise DuplicateTask(task.task_id)


async def _execute(ctx: dict[str, Any], payload: dict[str, Any]) -> None:
    await ctx["taskbench_execute"](TaskMessage.from_dict(payload))


class ArqBackend:
    @asynccontextmanager
    async def producer(self, ctx: ServiceContext) -> AsyncIterator[_Producer]:
        pool = await _open_pool(ctx.settings)
        try:
            yield _Producer(pool, ctx.settings)
        finally:
            await pool.aclose()

    async def run_worker(self, ctx: WorkerContext) -> None:
        import asyncio

        settings = ctx.settings

        async def on_startup(_: dict[str, Any]) -> None:
            await ctx.ready()

        worker = Worker(
            functions=[_execute_function()],
            queue_name=queue_name(settings),
            redis_settings=_worker_redis(settings),
            on_startup=on_startup,
            max_jobs=settings.concurrency,
            job_timeout=settings.task_timeout,
            keep_result=REMEMBER_IDS if settings.idempotency else 0,
            handle_signals=True,
            job_completion_wait=max(1, round(settings.shutdown_timeout)),
            job_serializer=_serialize,
            job_deserializer=_deserialize,
            ctx={"taskbench_execute": ctx.execute},
            log_results=False,
        )
        try:
            await worker.async_run()
        except asyncio.CancelledError:
            pass  # arq cancels its main task on SIGTERM once running jobs are done
        finally:
            await worker.close()

    async def queue_depth(self, settings: Settings, redis: aioredis.Redis) -> int:
        # arq keeps a job in its sorted set until it finished: queued and running ones
        return int(await redis.zcard(queue_name(settings)))

    async def purge(self, settings: Settings) -> None:
        pass  # Redis only: the harness deletes the run's keys


def _execute_function() -> Any:
    from arq.worker import func

    return func(_execute, name=FUNCTION)


backend = ArqBackend()
