"""PgQueuer: jobs are rows of a PostgreSQL table, workers claim them with ``FOR UPDATE SKIP LOCKED``.

Wiring, following PgQueuer's documentation and its source (pgqueuer 1.6.0; paths below are in the
installed package):
- one schema per run (:mod:`._postgres`): every connection has it on its ``search_path`` and
  PgQueuer's ``DBSettings`` names it as ``db_schema`` (its tables, enum, trigger function), so runs on
  one server never meet and ``purge`` drops the schema; ``prepare_broker`` runs PgQueuer's own DDL
  there (``Queries.install``, or ``Queries.upgrade`` when already installed: ``pgq install`` /
  ``pgq upgrade``), under PgQueuer's advisory ``schema_lock``;
- the LISTEN/NOTIFY channel is the run's too (``DBSettings.channel`` = the schema's name): channels
  are database-wide (``domain/settings.py``: ``QualifiedNames`` leaves it out), and the trigger
  function installed with the schema has it written in (``domain/schema/notify.py``);
- the API enqueues as PgQueuer's FastAPI example does (``examples/fastapi_usage.py``):
  ``Queries(AsyncpgPoolDriver(pool)).enqueue(entrypoint, json bytes, dedupe_key=task id)``;
- idempotency: ``dedupe_key`` is backed by a unique partial index over rows ``WHERE status IN
  ('queued', 'picked')`` (``domain/schema/queue.py``: ``dedupe_predicate``); a second enqueue of a
  queued or running id is a unique violation that ``Queries.enqueue`` raises as ``DuplicateJobError``
  (``adapters/persistence/queries.py``: ``raising_duplicate_job``): the producer raises DuplicateTask.
  A finished job's row is deleted (moved to ``pgqueuer_log``), so PgQueuer forgets its key: the API's
  claim in Redis covers a later repeat, as for SAQ;
- the worker is a ``QueueManager`` on one asyncpg connection (``AsyncpgDriver``), as the docs
  recommend for consumers ("Always use a direct asyncpg connection (not a pool) for the QueueManager",
  ``docs/guides/performance-tuning.md``), one ``@entrypoint``, run by PgQueuer's own supervisor
  (``pgqueuer.run``, ``adapters/cli/supervisor.py``). ``settings.concurrency`` is the worker's
  ``max_concurrent_tasks`` (a per-worker cap enforced by the dequeue query), not the entrypoint's
  ``concurrency_limit``, which is a limit for the whole fleet (``docs/guides/concurrency-control.md``);
- a dead worker: PgQueuer 1.6 has no ``retry_timer`` any more; ``QueueManager.run(heartbeat_timeout=)``
  (default 30 s, always on) makes every dequeue also take ``picked`` rows whose ``heartbeat`` is older
  than it (``adapters/persistence/qb.py``: the ``next_stale`` CTE), and a running job's heartbeat is
  written every ``heartbeat_timeout / 2`` (``core/heartbeat.py``). So the jobs of a SIGKILLed worker
  run again, from the start, ``heartbeat_timeout`` after their last heartbeat, at the next dequeue of
  any worker (on a NOTIFY, or after ``dequeue_timeout`` when idle): at-least-once, with no attempt
  limit. It is ``--option pgqueuer.heartbeat_timeout``, the library's 30 s unless given (a setting that
  changes the promise's wait takes the library's default, docs/backends.md); ``dequeue_timeout`` is
  the library's 30 s, or that timeout when shorter;
- a lost connection (a PostgreSQL restart): PgQueuer's manager fails on its next query and, by default,
  the worker would exit. Here the supervisor's ``restart_on_failure`` starts a new manager on a new
  connection every ``RESTART_DELAY`` s until the server answers, and ``shutdown_on_listener_failure``
  does the same when the LISTEN connection is dead (checked every 10 s) instead of falling back to
  polling every ``dequeue_timeout``. Jobs that finished while the server was down keep ``picked``
  (their status write failed) and run again after ``heartbeat_timeout``;
- SIGTERM: the manager stops dequeuing and waits for its running jobs (``core/tm.py``: ``TaskManager``
  awaits them, without a limit); after ``shutdown_timeout`` the jobs still running are cancelled and
  put back on the queue with PgQueuer's ``RetryRequested`` (``Queries.retry_job``: status ``queued``
  again). PgQueuer's own cancellation would log them ``canceled`` and delete them: lost.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from datetime import timedelta
from typing import TYPE_CHECKING, Any

import asyncpg
import pgqueuer
from pgqueuer.adapters.persistence.qb import QueryBuilderEnvironment, QueryQueueBuilder, QuerySchedulerBuilder
from pgqueuer.db import AsyncpgDriver, AsyncpgPoolDriver
from pgqueuer.domain.settings import DBSettings
from pgqueuer.errors import DuplicateJobError, RetryRequested
from pgqueuer.models import Channel, Job
from pgqueuer.qm import QueueManager
from pgqueuer.queries import Queries

from taskbench.backends import _postgres
from taskbench.backends._worker import stop_requested
from taskbench.backends.base import DuplicateTask, ServiceContext, WorkerContext
from taskbench.backends.pgqueuer import Options
from taskbench.messages import TaskMessage

if TYPE_CHECKING:
    import redis.asyncio as aioredis
    from fastapi import BackgroundTasks

    from taskbench.settings import Settings

log = logging.getLogger("taskbench.backends.pgqueuer.backend")

ENTRYPOINT = "taskbench_execute"
#: seconds without a heartbeat after which a picked job is taken again (unset: --task-timeout; 0: the library's)
#: ``QueueManager.run``'s defaults (``core/qm.py``)
LIBRARY_DEQUEUE_TIMEOUT = 30.0
LIBRARY_BATCH_SIZE = 10
#: seconds between a failed manager and the next (the supervisor's ``restart_delay``; its default is 5)
RESTART_DELAY = 1.0


def db_settings(settings: Settings) -> DBSettings:
    """PgQueuer's object names for the run: its schema, and a NOTIFY channel of the same name."""
    name = _postgres.schema(settings)
    return DBSettings(db_schema=name, channel=Channel(name), prefix="")


def _queries(driver: Any, settings: Settings) -> Queries:
    names = db_settings(settings)
    return Queries(driver, qbe=QueryBuilderEnvironment(names), qbq=QueryQueueBuilder(names),
                   qbs=QuerySchedulerBuilder(names))


def _server_settings(settings: Settings) -> dict[str, str]:
    return {"search_path": _postgres.schema(settings)}


async def _connect(settings: Settings) -> asyncpg.Connection:
    return await asyncpg.connect(_postgres.plain_url(settings), server_settings=_server_settings(settings))


async def _close(conn: asyncpg.Connection) -> None:
    try:
        await asyncio.wait_for(conn.close(), 5)
    except Exception:  # a dead connection (the server restarted): drop it
        conn.terminate()


class _Producer:
    def __init__(self, pool: asyncpg.Pool, settings: Settings) -> None:
        self._pool = pool
        self._queries = _queries(AsyncpgPoolDriver(pool), settings)

    async def enqueue(self, task: TaskMessage, later: BackgroundTasks) -> None:
        try:
            await self._queries.enqueue(ENTRYPOINT, json.dumps(task.to_dict()).encode(), dedupe_key=task.task_id)
        except DuplicateJobError:  # a job of this id is queued or running (finished ones are forgotten)
            raise DuplicateTask(task.task_id) from None

    async def check_broker(self) -> None:
        await self._pool.fetchval("SELECT 1")


class _QueueManager(QueueManager):  # type: ignore[misc,unused-ignore]
    """PgQueuer's manager, telling the worker once when it first looks for jobs (its LISTEN is set up
    and its tables checked by then: ``QueueManager.run`` does both before the first ``fetch_jobs``)."""

    on_consuming: Callable[[], Awaitable[None]] | None = None

    async def fetch_jobs(self, batch_size: int, global_concurrency_limit: int | None,
                         heartbeat_timeout: timedelta) -> AsyncGenerator[Job, None]:
        hook, self.on_consuming = self.on_consuming, None
        if hook is not None:
            await hook()
        async for job in super().fetch_jobs(batch_size, global_concurrency_limit, heartbeat_timeout):
            yield job


class PgQueuerBackend:
    def __init__(self) -> None:
        self._depth_conn: asyncpg.Connection | None = None

    async def prepare_broker(self, settings: Settings) -> None:
        await _postgres.create_schema(settings)
        conn = await _connect(settings)
        try:
            queries = _queries(AsyncpgDriver(conn), settings)
            async with queries.schema_lock():
                if await queries.schema_is_installed():
                    await queries.upgrade()  # idempotent: converges on the release's declaration
                else:
                    await queries.install()
        finally:
            await _close(conn)

    @asynccontextmanager
    async def producer(self, ctx: ServiceContext) -> AsyncIterator[_Producer]:
        # one connection per enqueue in flight: the pool bounds them, waiting callers queue for one
        size = max(4, min(ctx.settings.redis_max_connections, 64))
        pool = await asyncpg.create_pool(_postgres.plain_url(ctx.settings), min_size=2, max_size=size,
                                         server_settings=_server_settings(ctx.settings))
        try:
            yield _Producer(pool, ctx.settings)
        finally:
            await pool.close()

    async def run_worker(self, ctx: WorkerContext) -> None:
        settings = ctx.settings
        execute = ctx.execute
        timeout = Options.of(settings).heartbeat_timeout
        # the dequeue query caps this worker's picked jobs at max_concurrent_tasks, which PgQueuer wants
        # at least twice the batch: with concurrency 1 it picks 2 and the semaphore runs one at a time
        slots = asyncio.Semaphore(settings.concurrency)
        batch = max(1, min(LIBRARY_BATCH_SIZE, settings.concurrency // 2))
        abandon = asyncio.Event()  # set shutdown_timeout s after SIGTERM: running jobs go back
        told = False

        async def first_ready() -> None:  # once per process, not per manager (a restart after a failure)
            nonlocal told
            if not told:
                told = True
                await ctx.ready()

        async def run(job: Job) -> None:
            assert job.payload is not None
            message = TaskMessage.from_dict(json.loads(job.payload))
            async with _slot(slots, abandon):
                work = asyncio.ensure_future(execute(message))
                stopping = asyncio.ensure_future(abandon.wait())
                try:
                    await asyncio.wait({work, stopping}, return_when=asyncio.FIRST_COMPLETED)
                except BaseException:
                    work.cancel()
                    raise
                finally:
                    stopping.cancel()
                if not work.done():
                    work.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await work
                    log.warning("job %s (task %s) still running at the stop: back to the queue",
                                job.id, message.task_id)
                    raise RetryRequested(reason="worker stopped")
                work.result()

        @asynccontextmanager
        async def manager() -> AsyncIterator[_QueueManager]:
            conn = await _connect(settings)
            try:
                qm = _QueueManager(_queries(AsyncpgDriver(conn), settings),
                                   channel=Channel(db_settings(settings).channel))
                qm.entrypoint(ENTRYPOINT, accepts_context=False)(run)
                qm.on_consuming = first_ready
                yield qm
            finally:
                await _close(conn)

        def on_stop() -> None:
            log.info("stopping: running jobs have %g s to finish", settings.shutdown_timeout)
            asyncio.get_running_loop().call_later(settings.shutdown_timeout, abandon.set)

        try:
            with stop_requested(on_stop) as stop:
                await pgqueuer.run(
                    manager,
                    dequeue_timeout=timedelta(seconds=min(LIBRARY_DEQUEUE_TIMEOUT, timeout)),
                    batch_size=batch,
                    heartbeat_timeout=timedelta(seconds=timeout),
                    max_concurrent_tasks=max(2 * batch, settings.concurrency),
                    shutdown_on_listener_failure=True,
                    restart_on_failure=True,
                    restart_delay=timedelta(seconds=RESTART_DELAY),
                    shutdown=stop,  # ours: SIGTERM/SIGINT, not the supervisor's own handlers
                )
        finally:
            if self._depth_conn is not None:
                await _close(self._depth_conn)
                self._depth_conn = None

    async def queue_depth(self, settings: Settings, redis: aioredis.Redis) -> int:
        # jobs not yet picked by a worker, over a connection of its own (the broker is not Redis)
        conn = self._depth_conn
        if conn is None or conn.is_closed():
            conn = self._depth_conn = await _connect(settings)
        table = db_settings(settings).qualified.queue_table
        return int(await conn.fetchval(f"SELECT count(*) FROM {table} WHERE status = 'queued'"))  # noqa: S608

    async def purge(self, settings: Settings) -> None:
        await _postgres.drop_schema(settings)


@asynccontextmanager
async def _slot(slots: asyncio.Semaphore, abandon: asyncio.Event) -> AsyncIterator[None]:
    """One of the worker's ``concurrency`` slots; a job still waiting for one at the stop goes back."""
    if slots.locked():
        acquire = asyncio.ensure_future(slots.acquire())
        stopping = asyncio.ensure_future(abandon.wait())
        try:
            await asyncio.wait({acquire, stopping}, return_when=asyncio.FIRST_COMPLETED)
        except BaseException:
            if acquire.done() and not acquire.cancelled():
                slots.release()
            acquire.cancel()
            raise
        finally:
            stopping.cancel()
        if not acquire.done():
            acquire.cancel()
            raise RetryRequested(reason="worker stopped")
    else:
        await slots.acquire()  # free: at once
    try:
        yield
    finally:
        slots.release()


backend = PgQueuerBackend()
