"""SAQ on PostgreSQL: SAQ's ``PostgresQueue``, the jobs in a table, workers woken by LISTEN/NOTIFY.

Wiring, following SAQ's documentation and its source (saq 0.26, ``saq/queue/postgres.py``):
- the queue is ``PostgresQueue`` on a psycopg ``AsyncConnectionPool`` (autocommit, as SAQ requires),
  every connection with the run's schema first on its ``search_path`` (:mod:`._postgres`), so SAQ's
  tables (``saq_jobs``, ``saq_stats``, ``saq_versions``) are the run's own and ``purge`` drops them;
- its advisory locks (the migration's and the sweep's, ``pg_try_advisory_lock(saq_lock_keyspace, …)``)
  are database-wide and SAQ holds them for a connection's life: each run gets its own
  ``saq_lock_keyspace`` (a hash of the run id), or a second run on the same server would find the
  migration lock taken and skip creating its tables;
- the schema is made once per run by ``prepare_broker`` (``init_db``, SAQ's migrations), before the
  API and the workers connect (each ``connect`` runs ``init_db`` again: it finds the version current);
- a job's key is ``<run_id>:<task id>``: SAQ's enqueue is an ``INSERT … ON CONFLICT (key) DO UPDATE …
  WHERE status IN ('aborted', 'complete', 'failed')``, so a key still queued or running is refused
  (the producer raises DuplicateTask); a finished job is deleted at once (``ttl=-1``) and the API's
  claim covers a later repeat, as on Redis;
- a worker takes jobs with ``SELECT … FOR UPDATE SKIP LOCKED`` and marks them ``active`` in the same
  transaction: competing workers never take one job twice;
- the promise across a dead worker is SAQ's sweep: an ``active`` job whose ``heartbeat`` (here the task
  timeout) passed is aborted and, while ``retries`` allows, queued again; the options are those of
  the Redis backend (:mod:`taskbench.backends.saq.backend`): ``retries`` = ``--option saq.retries`` (SAQ's default 1:
  never again, at-most-once), ``timeout`` = ``heartbeat`` = ``task_timeout``, the sweep every
  ``task_timeout / 4`` s;
- the pool checks a connection before lending it (``check_connection``), as the pool SAQ makes itself
  from a URL (``PostgresQueue.from_url``) does: a connection a PostgreSQL restart broke is replaced,
  not handed to an enqueue;
- JSON (SAQ's default ``json.dumps``/``json.loads``, passed explicitly);
- SIGTERM: SAQ's worker stops dequeuing, waits up to ``shutdown_timeout`` for running jobs, then
  cancels the rest, which SAQ puts back on the queue (the upkeep loops of ``saq._Worker``).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

from psycopg_pool import AsyncConnectionPool
from saq.queue.postgres import PostgresQueue

from taskbench.backends import _postgres
from taskbench.backends.base import ServiceContext, WorkerContext
from taskbench.backends.saq.backend import Producer, work

if TYPE_CHECKING:

    from taskbench.settings import Settings


def queue_name(settings: Settings) -> str:
    """Also SAQ's NOTIFY channel (``saq:<name>``): channels are database-wide, so the run's id is in it."""
    return f"tb-{settings.run_id}"


def lock_keyspace(settings: Settings) -> int:
    """The run's first advisory-lock key (a signed 32-bit integer from the run id)."""
    return int.from_bytes(hashlib.sha256(settings.run_id.encode()).digest()[:4], "big", signed=True)


def _queue(settings: Settings, max_size: int) -> PostgresQueue:
    pool: AsyncConnectionPool[Any] = AsyncConnectionPool(
        _postgres.plain_url(settings), open=False, min_size=min(4, max_size), max_size=max_size,
        kwargs={"autocommit": True, "options": _postgres.options(settings)},
        check=AsyncConnectionPool.check_connection,
    )
    return PostgresQueue(
        pool, name=queue_name(settings), dump=json.dumps, load=json.loads,
        saq_lock_keyspace=lock_keyspace(settings), min_size=min(4, max_size), max_size=max_size,
        manage_pool_lifecycle=True,
    )


class _Producer(Producer):
    """SAQ's enqueue (:class:`taskbench.backends.saq.backend.Producer`), and ``/health``'s check over its pool."""

    async def check_broker(self) -> None:
        async with self._queue.pool.connection() as conn:
            await conn.execute("SELECT 1")


class SaqPostgresBackend:
    async def prepare_broker(self, settings: Settings) -> None:
        await _postgres.create_schema(settings)
        queue = _queue(settings, 2)
        await queue.connect()  # init_db: SAQ's migrations, in the run's schema
        await queue.disconnect()

    @asynccontextmanager
    async def producer(self, ctx: ServiceContext) -> AsyncIterator[_Producer]:
        # one connection per enqueue in flight: the pool bounds them, waiting callers queue for one
        queue = _queue(ctx.settings, max(4, min(ctx.settings.redis_max_connections, 64)))
        await queue.connect()
        try:
            yield _Producer(queue, ctx.settings)
        finally:
            await queue.disconnect()

    async def run_worker(self, ctx: WorkerContext) -> None:
        # the LISTEN connection, the dequeue, job updates and the upkeep loops: a few per slot at most
        await work(_queue(ctx.settings, ctx.settings.concurrency + 8), ctx)

    async def purge(self, settings: Settings) -> None:
        await _postgres.drop_schema(settings)


backend = SaqPostgresBackend()
