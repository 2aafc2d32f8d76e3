"""Procrastinate: jobs are rows of a PostgreSQL table; workers take them with ``FOR UPDATE SKIP LOCKED``.

Wiring, following Procrastinate's documentation and its source (procrastinate 3.10.0; paths below are
in the installed package):
- one ``App`` on a ``PsycopgConnector`` (a psycopg 3 ``AsyncConnectionPool``), opened for the API's
  lifetime (``open_async``), as the FastAPI example of ``docs/howto/basics/worker.md`` does; every
  connection's ``search_path`` is the run's schema (``_postgres.options``), where ``prepare_broker``
  applied Procrastinate's own ``schema.sql`` (``SchemaManager.apply_schema_async``, ``schema.py:37``)
  and ``purge`` drops it. The pools: 4 to 16 connections in the API (psycopg_pool's default is a
  fixed 4), 2 to ``concurrency + 3`` (at most 10) in a worker, whose LISTEN connection is apart;
- one task registered under a fixed name (``taskbench_execute``) and deferred with
  ``defer_async(payload=...)``: the arguments are a ``jsonb`` column, JSON by construction
  (``psycopg_connector.py:186``: a dict becomes ``Jsonb``, psycopg's ``json.dumps``);
- the queue is the run's (the schema's name, at most 40 characters): NOTIFY channels are per
  database, not per schema (``schema.sql:412``, ``procrastinate_queue_v1#<queue>``, 63 bytes at most),
  so a worker that listened on every queue (Procrastinate's default) would be woken, and could be
  asked to abort jobs, by another run on the same server;
- idempotency (``settings.idempotency``): the task id is the job's ``queueing_lock``; the unique
  index behind it covers ``todo`` jobs only (``schema.sql:100``), so a second defer is refused
  (``AlreadyEnqueued``, ``manager.py:147-155``; the producer raises DuplicateTask) only while the
  first waits. Once it runs or finished, the same id is accepted again, and ``lock`` (one ``doing``
  job per lock, ``schema.sql:102``) serializes runs rather than refusing them: neither remembers a
  run's ids, the API's claim does. ``delete_jobs="successful"``: a finished job's row (and its
  events) is deleted, the ledger records executions (Procrastinate keeps every job by default);
- across a dead worker, Procrastinate's default is at-most-once: its jobs stay ``doing`` for good.
  ``--option procrastinate.retry_stalled=true`` makes it at-least-once, the way
  ``docs/howto/production/retry_stalled_jobs.md`` documents it: workers write a heartbeat
  (``worker.py:481-490``), and a periodic task
  (``taskbench_retry_stalled_jobs``) retries the ``doing`` jobs of workers whose heartbeat is older
  than ``task_timeout`` (``JobManager.get_stalled_jobs``, ``manager.py:223``, then ``retry_job``).
  The defaults would be a 10 s heartbeat, a 30 s staleness and, in the documentation's example, a
  run every 10 minutes; without that task (Procrastinate's default) a killed worker's jobs stay
  ``doing`` forever. Here the heartbeat is every ``task_timeout / 5`` s (at most 10 s), workers
  pruned at start after ``task_timeout`` (``stalled_worker_timeout``), and the task runs every
  ``task_timeout / 4`` s (1 to 60 s), so a killed worker's jobs are back within about
  ``1.25 * task_timeout`` + the 5 s fetch poll (a retried job is not NOTIFYed);
- SIGTERM/SIGINT: the worker's task is cancelled (``install_signal_handlers=False``, the documented
  way for a worker inside a larger program, ``docs/howto/advanced/shutdown.md``): it stops fetching,
  waits up to ``shutdown_timeout`` for its jobs (``shutdown_graceful_timeout``, ``worker.py:568``; the
  library's default waits forever), then cancels the rest; the task's retry strategy always retries
  such a job (``_Retry``): with no strategy (the default) it ends ``aborted`` and never runs again
  (``worker.py:335-342``, ``tasks.py:276``). A task that raises is retried twice, at once;
- a lost database: Procrastinate's worker stops itself when its LISTEN connection cannot reconnect or
  a query fails (``worker.py:621-641``, ``psycopg_connector.py:317-353``), leaving the restart to a
  process manager; ``run_worker`` starts it again (1 to 10 s apart) until SIGTERM, so the process
  lives through a PostgreSQL restart as the Redis backends do. A job whose status write
  (``finish_job``) the outage broke stays ``doing``: with ``--option procrastinate.retry_stalled=true``, once its
  worker unregistered, it is stalled and runs again (a duplicate, not a loss); without, it stays.

Known limits of the library, measured rather than patched: a NOTIFY that arrives while a fetch finds
nothing is cleared with it (``worker.py:400-403``), so such a job waits for the next notification or
the 5 s poll (``fetch_job_polling_interval``, the library's default, kept); two runs of the stalled-job
task at once (one of them delayed past the next tick) could retry a job the first one just put back and
a live worker took (``retry_job`` checks the status, not the worker, ``schema.sql:364-400``), running it
twice; a worker whose event loop is blocked longer than ``task_timeout`` (io/sync) writes no heartbeat
and its running jobs are retried.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

from procrastinate import App, JobContext, PsycopgConnector, RetryDecision, RetryStrategy
from procrastinate.exceptions import AlreadyEnqueued

from taskbench.backends import _postgres
from taskbench.backends._worker import stop_requested
from taskbench.backends.base import DuplicateTask, ServiceContext, WorkerContext
from taskbench.backends.procrastinate import Options
from taskbench.messages import TaskMessage

if TYPE_CHECKING:
    import psycopg
    import redis.asyncio as aioredis
    from fastapi import BackgroundTasks

    from taskbench.settings import Settings

log = logging.getLogger("taskbench.backends.procrastinate.backend")

TASK = "taskbench_execute"
RETRY_STALLED = "taskbench_retry_stalled_jobs"
#: retries of a task that raised (3 attempts in all); a shutdown's abort is always retried
RETRIES = 2
#: the API's pool: psycopg_pool's default size to start with, grown under load
API_POOL = (4, 16)
#: a worker's pool, at most: its jobs' status updates, the fetch loop, heartbeat and abort polls
WORKER_POOL_MAX = 10
#: a NOTIFY channel is at most 63 bytes, ``procrastinate_queue_v1#`` takes 23 of them
_QUEUE_MAX = 40
#: seconds between two starts of a worker that stopped by itself (a lost database), doubling
_RESTART_DELAYS = (1.0, 10.0)


def queue_name(settings: Settings) -> str:
    """The run's queue: its schema's name, cut and given a hash when longer than a NOTIFY channel allows."""
    name = _postgres.schema(settings)
    if len(name) > _QUEUE_MAX:
        digest = hashlib.sha256(settings.run_id.encode()).hexdigest()[:8]
        name = f"{name[:_QUEUE_MAX - 9]}_{digest}"
    return name


def stalled_after(settings: Settings) -> float:
    """Seconds without a heartbeat after which a worker is dead and its ``doing`` jobs are retried."""
    return settings.task_timeout


def heartbeat_interval(settings: Settings) -> float:
    return min(10.0, stalled_after(settings) / 5)


def retry_cron(settings: Settings) -> str:
    """Every ``task_timeout / 4`` s, rounded down to a divisor of 60 (1 to 60 s): cron with seconds."""
    every = stalled_after(settings) / 4
    if every >= 60:
        return "* * * * *"
    step = max(d for d in (1, 2, 3, 4, 5, 6, 10, 12, 15, 20, 30) if d <= max(1.0, every))
    return f"* * * * * */{step}"


class _Retry(RetryStrategy):  # type: ignore[misc,unused-ignore]
    """``max_attempts`` retries of a task that raised; a job cancelled by its worker's shutdown (after
    ``shutdown_graceful_timeout``) is always put back, whatever its attempts."""

    def get_retry_decision(self, *, exception: BaseException, job: Any) -> Any:
        if isinstance(exception, asyncio.CancelledError):
            return RetryDecision(retry_in={"seconds": 0})
        return super().get_retry_decision(exception=exception, job=job)


def _connect_kwargs(settings: Settings) -> dict[str, Any]:
    return {"options": _postgres.options(settings)}


def make_app(settings: Settings, min_size: int, max_size: int) -> Any:
    """The run's App (not opened): the task, the stalled-job task when asked, a pool on the run's schema."""
    # the schema as a connection keyword (libpq ``options``): the pool's connections and the
    # worker's LISTEN connection (``psycopg_connector.py:299-306``) all get it
    connector = PsycopgConnector(conninfo=_postgres.plain_url(settings), kwargs=_connect_kwargs(settings),
                                 min_size=min_size, max_size=max_size, name=f"procrastinate-{settings.run_id}")
    app = App(connector=connector)
    queue = queue_name(settings)

    @app.task(name=TASK, queue=queue, pass_context=True,  # type: ignore[untyped-decorator,unused-ignore]
              retry=_Retry(max_attempts=RETRIES))
    async def execute(context: JobContext, payload: dict[str, Any]) -> None:
        await context.additional_context["taskbench_execute"](TaskMessage.from_dict(payload))

    if Options.of(settings).retry_stalled:
        _retry_stalled_jobs(app, settings, queue)
    return app


def _retry_stalled_jobs(app: Any, settings: Settings, queue: str) -> None:
    """docs/howto/production/retry_stalled_jobs.md, on the run's queue and timings
    (``--option procrastinate.retry_stalled=true``; the library has no such task unless its user adds it)."""
    stale = stalled_after(settings)

    @app.periodic(cron=retry_cron(settings), periodic_id="retry_stalled_jobs")  # type: ignore[untyped-decorator,unused-ignore]
    @app.task(name=RETRY_STALLED, queue=queue,  # type: ignore[untyped-decorator,unused-ignore]
              queueing_lock=RETRY_STALLED, pass_context=True)
    async def retry_stalled_jobs(context: JobContext, timestamp: int) -> None:
        manager = context.app.job_manager
        for job in await manager.get_stalled_jobs(queue=queue, seconds_since_heartbeat=stale):
            log.warning("retrying stalled job %s (%s, worker %s, attempts %d)",
                        job.id, job.task_name, job.worker_id, job.attempts)
            await manager.retry_job(job)


async def _supervise(app: Any, options: dict[str, Any], stop: asyncio.Event, ctx: WorkerContext) -> None:
    """Run Procrastinate's worker until ``stop``, then stop it gracefully; start it again whenever it
    stopped by itself (a lost database), 1 to 10 s apart."""
    delay = _RESTART_DELAYS[0]
    ready = False
    loop = asyncio.get_running_loop()
    while not stop.is_set():
        started = loop.time()
        worker = asyncio.create_task(app.run_worker_async(**options), name="procrastinate worker")
        if not ready:  # its first fetch takes what waits; LISTEN starts beside it
            ready = True
            await ctx.ready()
        stopping = asyncio.create_task(stop.wait())
        await asyncio.wait({worker, stopping}, return_when=asyncio.FIRST_COMPLETED)
        stopping.cancel()
        if not worker.done():  # SIGTERM/SIGINT: stop fetching, wait for the jobs, abort the rest
            worker.cancel()
            await asyncio.wait({worker})
        exc = None if worker.cancelled() else worker.exception()
        if stop.is_set():
            if exc is not None:  # its jobs are finished or back in the queue all the same
                log.warning("procrastinate worker stopped with an error: %r", exc)
            return
        if loop.time() - started > _RESTART_DELAYS[1]:
            delay = _RESTART_DELAYS[0]  # it had been running: a new outage
        log.warning("procrastinate worker stopped by itself (%r); starting it again in %g s", exc, delay)
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(delay):
                await stop.wait()
        delay = min(delay * 2, _RESTART_DELAYS[1])


class _Producer:
    def __init__(self, app: Any, settings: Settings) -> None:
        self._app = app
        self._task = app.tasks[TASK]
        self._lock = settings.idempotency

    async def enqueue(self, task: TaskMessage, later: BackgroundTasks) -> None:
        deferrer = self._task.configure(queueing_lock=task.task_id) if self._lock else self._task
        try:
            await deferrer.defer_async(payload=task.to_dict())
        except AlreadyEnqueued:  # a job of this id is still waiting (todo): nothing was inserted
            raise DuplicateTask(task.task_id) from None

    async def check_broker(self) -> None:
        if not await self._app.check_connection_async():
            raise RuntimeError("procrastinate_jobs is missing from the run's schema (taskbench prepare)")


class ProcrastinateBackend:
    def __init__(self) -> None:
        self._depth: psycopg.AsyncConnection[Any] | None = None

    @asynccontextmanager
    async def producer(self, ctx: ServiceContext) -> AsyncIterator[_Producer]:
        app = make_app(ctx.settings, *API_POOL)
        async with app.open_async():
            yield _Producer(app, ctx.settings)

    async def run_worker(self, ctx: WorkerContext) -> None:
        settings = ctx.settings
        app = make_app(settings, 2, min(settings.concurrency + 3, WORKER_POOL_MAX))
        options: dict[str, Any] = {
            "queues": [queue_name(settings)],
            "concurrency": settings.concurrency,
            "shutdown_graceful_timeout": settings.shutdown_timeout,
            "install_signal_handlers": False,  # ours below: the worker is cancelled, as documented
            "update_heartbeat_interval": heartbeat_interval(settings),
            "stalled_worker_timeout": stalled_after(settings),
            "delete_jobs": "successful",
            "additional_context": {"taskbench_execute": ctx.execute},
        }
        with stop_requested() as stop:
            async with app.open_async():
                await _supervise(app, options, stop, ctx)

    async def prepare_broker(self, settings: Settings) -> None:
        """The run's schema, and Procrastinate's tables, functions and triggers in it (once)."""
        await _postgres.create_schema(settings)
        app = make_app(settings, 1, 1)
        async with app.open_async():
            if not await app.check_connection_async():  # procrastinate_jobs not in the schema yet
                await app.schema_manager.apply_schema_async()

    async def queue_depth(self, settings: Settings, redis: aioredis.Redis) -> int:
        """Jobs of the task waiting or running (a connection of its own, kept; reopened after an error)."""
        import psycopg

        if self._depth is None or self._depth.closed:
            self._depth = await psycopg.AsyncConnection.connect(
                _postgres.plain_url(settings), autocommit=True, **_connect_kwargs(settings))
        try:
            cursor = await self._depth.execute(
                "SELECT count(*) FROM procrastinate_jobs WHERE status IN ('todo', 'doing') AND task_name = %s",
                (TASK,),
            )
            row = await cursor.fetchone()
        except Exception:
            with contextlib.suppress(Exception):
                await self._depth.close()
            self._depth = None
            raise
        return int(row[0]) if row else 0

    async def purge(self, settings: Settings) -> None:
        await _postgres.drop_schema(settings)


backend = ProcrastinateBackend()
