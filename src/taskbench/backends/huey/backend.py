"""Huey: the API enqueues through ``RedisHuey`` off its event loop; Huey's consumer runs the tasks.

Wiring (Huey 3.5; the source cited is ``huey/`` of that release), and why:
- ``RedisHuey`` named ``taskbench.<run id>`` (``clean_name=False``: Huey's cleaning would drop the run id's
  dots and dashes, and two runs could share a queue), so its keys are ``huey.redis.taskbench.<run id>``
  and its siblings (the registry's key patterns: the harness deletes them); ``results=False``: the
  ledger, not Huey's result store, records executions; Huey's ``Message`` as a JSON array
  (:func:`json_serializer`) instead of Huey's default pickle;
- the task is registered under one name on both sides (``huey.task(name=FUNCTION)`` of a function of
  this module: Huey's registry key is the function's module and that name); the API calls
  ``huey.enqueue(task)``, one LPUSH (``RedisStorage.enqueue``), blocking I/O run on the shared producer
  threads (:mod:`._sync_producer`) over a blocking connection pool of as many connections, whose socket
  timeout is ``--enqueue-timeout``;
- idempotency: Huey has no deduplication key (a task's id is a fresh uuid4), so the API's claim refuses a
  known task id (``remembers_ids`` off);
- the worker is Huey's ``Consumer`` with ``--concurrency`` workers of ``--option huey.worker_type``: ``thread``
  (Huey's default) hands the coroutine to this process's event loop, which owns the Workloads' clients,
  and waits; ``process`` forks the workers (``ProcessEnvironment``), which run the task with
  :mod:`._forked` (a synchronous Redis client of their own, ``Ledger.record_sync``) and die with this
  process. Greenlet workers need gevent's monkey-patching before anything else is imported, which an
  asyncio worker process cannot have: not offered;
- ``graceful_signal="TERM"``: the harness stops a worker with SIGTERM, and Huey's default treats SIGTERM
  as "interrupt the running tasks" (SIGINT is its graceful one); the stop sets the consumer's flag and
  joins the workers for up to ``--stop-timeout`` (``Consumer.stop(graceful=True)``).

The promise across a dead worker, from the source: a worker takes a task with ``BRPOP`` on the queue's
list (``RedisStorage.dequeue``), so the task is off Redis before it runs; nothing acknowledges it and
nothing puts it back (``Worker.loop``, ``huey/consumer.py``). A worker killed mid-task loses it: at-most-once.
A broker restart: a worker's dequeue that fails is logged and retried after a back-off (``Worker.loop``),
and what the broker kept (``--redis-fsync always``) is still queued.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

from taskbench.backends._forked import die_with_parent, forked_task
from taskbench.backends._sync_producer import SyncProducer, sync_producer
from taskbench.backends._worker import blocking_execute, stop_requested
from taskbench.backends.base import ServiceContext, WorkerContext
from taskbench.backends.huey import Options
from taskbench.messages import TaskMessage

if TYPE_CHECKING:
    import redis
    import redis.asyncio as aioredis
    from fastapi import BackgroundTasks

    from taskbench.settings import Settings

FUNCTION = "taskbench_execute"
#: how often the consumer's workers are checked and a dead one replaced (Huey's default)
HEALTH_INTERVAL = 10.0


def huey_name(settings: Settings) -> str:
    return f"taskbench.{settings.run_id}"


def queue_key(settings: Settings) -> str:
    return f"huey.redis.{huey_name(settings)}"


def json_serializer() -> Any:
    """Huey's ``Serializer`` with JSON instead of pickle: its ``Message`` (a namedtuple of plain values for
    our task: no eta, no callbacks) as a JSON array."""
    import json

    from huey.registry import Message
    from huey.serializer import Serializer

    class JsonSerializer(Serializer):  # type: ignore[misc]
        def _serialize(self, data: Any) -> bytes:
            return json.dumps(list(data)).encode()

        def _deserialize(self, data: bytes) -> Any:
            return Message(*json.loads(data))

    return JsonSerializer()


def make_huey(settings: Settings, pool: redis.ConnectionPool) -> Any:
    from huey import RedisHuey

    return RedisHuey(huey_name(settings), results=False, store_none=False, utc=True, connection_pool=pool,
                     clean_name=False, serializer=json_serializer())


def _stub(payload: dict[str, Any]) -> None:
    """The API's handle on the task (it never runs there)."""


class _Producer:
    def __init__(self, task: Any, threads: SyncProducer) -> None:
        self._task = task
        self._threads = threads

    async def enqueue(self, task: TaskMessage, later: BackgroundTasks) -> None:
        await self._threads.run(functools.partial(self._task, task.to_dict()))


class HueyBackend:
    @asynccontextmanager
    async def producer(self, ctx: ServiceContext) -> AsyncIterator[_Producer]:
        settings = ctx.settings
        async with sync_producer(settings, "huey") as threads:
            pool = threads.redis_pool(settings.broker_address)
            huey = make_huey(settings, pool)
            try:
                yield _Producer(huey.task(name=FUNCTION)(_stub), threads)
            finally:
                pool.disconnect()

    async def run_worker(self, ctx: WorkerContext) -> None:
        import redis
        from huey.consumer import Consumer

        settings = ctx.settings
        pool = redis.ConnectionPool.from_url(settings.broker_address)
        huey = make_huey(settings, pool)
        worker_type = Options.of(settings).worker_type
        if worker_type == "process":
            run = forked_task(settings)
            huey.on_startup()(die_with_parent)  # in each forked worker, before its first task
        else:
            # a Huey worker thread runs the task (a body that needs the loop: on this loop); Huey took it off
            # Redis before it ran and acknowledges nothing after: a record's reply is read later, or the record
            # spooled (taskbench.ledger.recording.spool) in a worker the harness started
            run = blocking_execute(ctx, acknowledges=False)

        def execute(payload: dict[str, Any]) -> None:  # registered as <this module>.FUNCTION, as the API's
            run(payload)

        huey.task(name=FUNCTION)(execute)
        consumer = Consumer(huey, workers=settings.concurrency, worker_type=worker_type, periodic=False,
                            shutdown_timeout=settings.shutdown_timeout, graceful_signal="TERM")
        loop = asyncio.get_running_loop()
        consumer.start()  # its signal handlers are replaced by ours below
        with stop_requested() as stopping:
            try:
                await ctx.ready()
                while not stopping.is_set():
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(stopping.wait(), HEALTH_INTERVAL)
                    if not stopping.is_set():
                        consumer.check_worker_health()
            finally:
                # the workers' tasks need this loop to finish: join them elsewhere
                await loop.run_in_executor(None, functools.partial(consumer.stop, graceful=True))
                pool.disconnect()

    async def queue_depth(self, settings: Settings, redis: aioredis.Redis) -> int:
        return int(await redis.llen(queue_key(settings)))

    async def purge(self, settings: Settings) -> None:
        pass  # Redis only: the harness deletes the registry's key patterns


backend = HueyBackend()
