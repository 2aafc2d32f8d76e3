"""streaq: producer appends to a Redis stream; a streaq Worker reads it through a consumer group.

Wiring, following streaq's documentation and its source (streaq 7.2):
- queue ``<run prefix>streaq``: every key streaq creates is ``streaq:<queue>:…``;
- JSON serialization (streaq's default is pickle). streaq's client decodes replies as UTF-8, so a
  binary format such as msgpack cannot be read back; ``default=repr`` lets the failure records streaq
  writes for a failed task (which carry the exception) be serialized too;
- the API enqueues by task name with ``Worker.enqueue_unsafe`` (streaq's documented way to keep task
  definitions out of the producer), under the task id: streaq stores a task's data with SET NX, so a
  second enqueue of a task that has not finished is refused, but silently (``Task.__await__`` drops
  the script's answer) and only until the task finished and its data was deleted: the API's claim
  gives the 409;
- at-least-once: a message stays pending in the consumer group until its task finished; a running
  task's message is re-claimed by its worker every 0.9 × ``idle_timeout``, so the message of a dead
  worker goes idle and another worker takes it (XAUTOCLAIM) once ``idle_timeout`` =
  ``task_timeout`` has passed; ``max_tries`` bounds the attempts, ``timeout`` = ``task_timeout`` with
  ``retry_timeouts`` re-runs a task that timed out;
- ``ttl=0``: results are not stored, the ledger records executions;
- SIGTERM: streaq's worker handles SIGINT/SIGTERM itself (anyio signal receiver): it stops reading,
  gives running tasks ``grace_period`` = ``shutdown_timeout`` and cancels the rest, whose messages
  it marks reclaimable at once.
"""

from __future__ import annotations

import functools
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import timedelta
from typing import TYPE_CHECKING, Any

import anyio
from streaq import Worker

from taskbench.backends.base import Execute, ServiceContext, WorkerContext
from taskbench.messages import TaskMessage

if TYPE_CHECKING:
    from fastapi import BackgroundTasks

    from taskbench.settings import Settings

FUNCTION = "taskbench_execute"
#: attempts in all, counting runs interrupted by a dead worker
MAX_TRIES = 3

_dumps = functools.partial(json.dumps, default=repr)


def queue_name(settings: Settings) -> str:
    return f"{settings.prefix}streaq"


def _worker(settings: Settings, **kwargs: Any) -> Any:
    """A streaq Worker: the producer's client and the consumer share these settings."""
    return Worker(
        redis_url=settings.broker_address,
        redis_kwargs={"max_connections": settings.redis_max_connections},
        queue_name=queue_name(settings),
        concurrency=settings.concurrency,
        serializer=_dumps,
        deserializer=json.loads,
        idle_timeout=timedelta(seconds=settings.task_timeout),
        grace_period=settings.shutdown_timeout,
        handle_signals=True,
        **kwargs,
    )


class _Producer:
    def __init__(self, worker: Any) -> None:
        self._worker = worker

    async def enqueue(self, task: TaskMessage, later: BackgroundTasks) -> None:
        job = self._worker.enqueue_unsafe(FUNCTION, task.to_dict())
        job.id = task.task_id
        await job  # publishes; refused quietly (not reported) if this id is queued or running


class StreaqBackend:
    @asynccontextmanager
    async def producer(self, ctx: ServiceContext) -> AsyncIterator[_Producer]:
        worker = _worker(ctx.settings)
        async with worker:
            yield _Producer(worker)

    async def run_worker(self, ctx: WorkerContext) -> None:
        settings = ctx.settings

        @asynccontextmanager
        async def lifespan() -> AsyncIterator[Execute]:
            yield ctx.execute  # tasks reach it as ``worker.context``

        worker = _worker(settings, lifespan=lifespan)

        @worker.task(  # type: ignore[untyped-decorator,unused-ignore]
            name=FUNCTION,
            timeout=timedelta(seconds=settings.task_timeout),
            retry_timeouts=True,
            max_tries=MAX_TRIES,
            ttl=0,
        )
        async def run(payload: dict[str, Any]) -> None:
            await worker.context(TaskMessage.from_dict(payload))

        async with anyio.create_task_group() as tg:
            await tg.start(worker.run_async)  # returns once it reads the stream
            await ctx.ready()
        # run_async returned: a signal stopped the worker and its tasks finished or were handed back

    async def purge(self, settings: Settings) -> None:
        pass  # Redis only: the harness deletes the run's keys


backend = StreaqBackend()
