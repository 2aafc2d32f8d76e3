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
  it marks reclaimable at once;
- a worker whose connection breaks (a broker restart) ends its process: streaq's long-lived tasks then
  fail, and its teardown can wait forever on coredis's connection pool, leaving a worker that neither
  reads nor exits (655 tasks left unread in one run of the fault matrix, the worker exiting at once
  in the next). Once one of those tasks fails, or the worker's lifespan ends without a stop
  signal, the process exits after ``TEARDOWN_S`` if it has not by then, so a supervisor
  (``--restart-workers``, the seed's ``restart: on-failure``) starts a fresh worker, which reclaims the
  dead one's pending messages after ``idle_timeout``.
"""

from __future__ import annotations

import functools
import json
import logging
import os
import threading
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

log = logging.getLogger("taskbench.backends.streaq.backend")

FUNCTION = "taskbench_execute"
#: seconds a failed worker's teardown may take before the process ends itself
TEARDOWN_S = 5.0
#: attempts in all, counting runs interrupted by a dead worker
MAX_TRIES = 3

_dumps = functools.partial(json.dumps, default=repr)


def queue_name(settings: Settings) -> str:
    return f"{settings.prefix}streaq"


_ending = threading.Lock()


def _exit_unless_gone(why: str) -> None:
    """End the process in ``TEARDOWN_S`` unless it ended by then (a daemon timer dies with it); the
    first failure arms it, the others (every consumer fails with the connection) are its consequences."""
    if not _ending.acquire(blocking=False):
        return
    log.error("%s: the worker ends in %.0f s unless its teardown finished", why, TEARDOWN_S)
    timer = threading.Timer(TEARDOWN_S, os._exit, args=(1,))
    timer.daemon = True
    timer.start()


class _Worker(Worker):  # type: ignore[misc,unused-ignore]
    """streaq's Worker whose failed long-lived tasks end the process (see the module's docstring)."""

    #: SIGTERM or SIGINT reached streaq's handler: the worker is stopping as asked
    signalled = False

    async def signal_handler(self, *args: Any, **kwargs: Any) -> None:
        await super().signal_handler(*args, **kwargs)
        self.signalled = True

    async def _watched(self, name: str, method: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return await method(*args, **kwargs)
        except Exception as exc:
            _exit_unless_gone(f"streaq's {name} failed ({type(exc).__name__}: {exc})")
            raise

    async def consumer(self, *args: Any, **kwargs: Any) -> None:
        await self._watched("consumer", super().consumer, *args, **kwargs)

    async def producer(self, *args: Any, **kwargs: Any) -> None:
        await self._watched("producer", super().producer, *args, **kwargs)

    async def schedule_delayed_tasks(self, *args: Any, **kwargs: Any) -> None:
        await self._watched("delayed-task scheduler", super().schedule_delayed_tasks, *args, **kwargs)

    async def renew_idle_timeouts(self, *args: Any, **kwargs: Any) -> None:
        await self._watched("idle-timeout renewal", super().renew_idle_timeouts, *args, **kwargs)


def _worker(settings: Settings, **kwargs: Any) -> Any:
    """A streaq Worker: the producer's client and the consumer share these settings."""
    return _Worker(
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
            try:
                yield ctx.execute  # tasks reach it as ``worker.context``
            finally:
                if not worker.signalled:  # streaq stopped on its own: a failure, whose teardown may hang
                    _exit_unless_gone("streaq's worker stopped without a stop signal")

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
