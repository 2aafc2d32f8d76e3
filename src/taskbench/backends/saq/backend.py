"""SAQ: producer pushes job ids onto a Redis list; a separate SAQ Worker moves them to an active list.

Wiring, following SAQ's documentation and its source (saq 0.26):
- the queue is named ``<run prefix>saq``; every job key is ``<run_id>:<task id>`` and is given
  explicitly, so a second enqueue of a task that is still queued or running is refused
  (SAQ's enqueue script checks the queue's ``incomplete`` set; the producer raises DuplicateTask) and
  abort markers, which SAQ keys by job key alone (``saq:abort:<key>``), stay inside the run. A
  finished job leaves ``incomplete`` whatever its ``ttl``, so SAQ would run its key again: the API's
  claim covers that;
- JSON serialization: SAQ's default ``dump``/``load`` are ``json.dumps``/``json.loads``; they are
  passed explicitly so that the choice is visible here;
- a dead worker: ``timeout`` and ``heartbeat`` are ``task_timeout``, and the sweep runs every
  ``task_timeout / 4`` seconds, so the job of a SIGKILLed worker is found stuck and aborted (SAQ's
  defaults are timeout=10 s, heartbeat off and a 60 s sweep); whether it runs again is ``retries``
  (SAQ counts the first attempt): ``--option saq.retries``, SAQ's default 1, leaves it ``aborted`` for good
  (at-most-once), 2 or more re-queue it (at-least-once, up to that many attempts);
- ``ttl=-1``: a finished job's record is deleted at once, the ledger records executions;
- SIGTERM: SAQ's worker installs its own SIGINT/SIGTERM handlers, stops dequeuing (each slot blocks
  at most ``dequeue_timeout`` = 1 s in BLMOVE), waits up to ``shutdown_timeout`` for running jobs
  (``shutdown_grace_period_s``), then cancels what is left, which SAQ puts back on the queue.

Two SAQ behaviours are adjusted in small subclasses, see ``_Queue.sweep`` and ``_Worker.upkeep``.

Seed 000's SAQ (0.12, the pinned environment ``article-000``, ``run --versions article-000``) runs with
SAQ's own ``Queue`` and ``Worker`` of that release, unmodified: the subclasses above are written against
0.26's internals, and the article ran 0.12 as it came. What differs there, from 0.12.x's source
(``saq/queue.py``, ``saq/worker.py``): one Redis queue class (no ``connect()``), no shutdown grace (a
SIGTERM cancels the running jobs at once), upkeep that sleeps its whole interval, and a sweep that
finishes every job it sweeps as aborted, never retried (``Queue.sweep``: ``job.finish(Status.ABORTED,
error="swept")`` for a job in ``active`` that is stuck or not yet marked active): whatever ``retries``,
the job of a dead worker is dropped there (at-most-once), and the race of tobymao/saq#277 marks a job
that is just starting as aborted while it runs on.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import math
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

from redis import asyncio as aioredis
from saq import Queue, Worker
from saq.job import Job, Status

from taskbench.backends._auth import serve_asgi
from taskbench.backends._redis import reconnecting
from taskbench.backends.base import DuplicateTask, ServiceContext, WorkerContext
from taskbench.backends.saq import Options
from taskbench.messages import TaskMessage
from taskbench.workloads import RESERVED

try:
    from saq.queue.redis import RedisQueue
except ImportError:  # SAQ before 0.13 (seed 000's 0.12): one Redis queue class, saq.Queue
    RedisQueue = Queue
#: SAQ 0.12 (seed 000's version, docs above): its own classes, unmodified
LEGACY = RedisQueue is Queue

if TYPE_CHECKING:
    from fastapi import BackgroundTasks

    from taskbench.settings import Settings

log = logging.getLogger("taskbench.backends.saq.backend")

FUNCTION = "taskbench_execute"
#: attempts in all (SAQ counts the first one): survives two dead workers in a row
#: seconds a worker slot blocks in BLMOVE before it checks whether it should stop
DEQUEUE_TIMEOUT = 1.0


def queue_name(settings: Settings) -> str:
    return f"{settings.prefix}saq"


def job_key(settings: Settings, task_id: str) -> str:
    return f"{settings.run_id}:{task_id}"


def _seconds(value: float) -> int:
    """SAQ's job timeout and heartbeat are whole seconds."""
    return max(1, math.ceil(value))


def sweep_interval(settings: Settings) -> int:
    """How often a worker looks for stuck jobs: a quarter of the task timeout, 1 to 60 s."""
    return min(60, max(1, int(settings.task_timeout // 4)))


def _client(settings: Settings, connections: int, *, worker: bool = False) -> aioredis.Redis:
    if not worker:
        # the API's: a plain pool, bounded by SAQ's own limit on concurrent operations (max_ops, a
        # few connections fewer), so a call never finds the pool exhausted
        return aioredis.Redis.from_url(settings.broker_address, max_connections=connections)
    # A worker's: a blocking pool (a burst of job updates waits for a connection instead of failing),
    # whose connections retry a lost broker (a restart) instead of failing the job it is processing.
    pool = aioredis.BlockingConnectionPool.from_url(
        settings.broker_address, max_connections=connections, timeout=30, **reconnecting()
    )
    return aioredis.Redis(connection_pool=pool)


class _Queue(RedisQueue):  # type: ignore[misc,unused-ignore]
    """SAQ's Redis queue with a sweep that cannot duplicate or drop a job that has just started.

    A worker takes a job in two steps: BLMOVE moves its id from ``queued`` to ``active``, then the
    worker writes the job with status ``active``. SAQ's sweep treats any job in ``active`` whose
    status is not ``active`` as abandoned and aborts and re-queues it, so a sweep that lands between
    the two steps sweeps a job that is about to run (tobymao/saq#277, #124): the job then runs twice,
    or, with ``ttl=-1``, is aborted while running and lost. Here such a job is swept only if a later
    sweep of this process finds it unchanged, and a swept job that finished while the sweep waited
    for it is not re-queued. Stuck ``active`` jobs (timeout or heartbeat passed) are swept at once,
    as in SAQ. A record that is not a job (not JSON, not a job's fields) is skipped and logged;
    SAQ's sweep raised on it on every pass, so no stuck job was ever re-queued again.
    """

    _cleanup_script: Any

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._not_started: dict[bytes, bytes] = {}
        self._skipped: set[bytes] = set()

    async def sweep(self, lock: int = 60, abort: float = 5.0) -> list[str]:
        if not self._cleanup_script:
            # SAQ's own script: one worker per ``lock`` seconds reads the active jobs.
            self._cleanup_script = self.redis.register_script(
                """
                local id_jobs = {}
                if redis.call('EXISTS', KEYS[1]) == 0 then
                    redis.call('SETEX', KEYS[1], ARGV[1], 1)
                    for i, v in ipairs(redis.call('LRANGE', KEYS[2], 0, -1)) do
                        id_jobs[i] = {v, redis.call('GET', v)}
                    end
                end
                return id_jobs
                """
            )
        id_jobs = await self._cleanup_script(
            keys=[self._sweep, self._active], args=[lock], client=self.redis
        )
        seen, self._not_started = self._not_started, {}
        swept: list[bytes] = []
        stuck: list[Job] = []
        for job_id, job_bytes in id_jobs:
            try:
                job = self.deserialize(job_bytes)
            except Exception as exc:  # SAQ's sweep raises here on every pass: no stuck job is ever re-queued
                self._malformed(job_id, job_bytes, exc)
                continue
            if job is None:  # record gone: SAQ's cleanup
                swept.append(job_id)
                async with self.redis.pipeline(transaction=True) as pipe:
                    await pipe.lrem(self._active, 0, job_id).zrem(self._incomplete, job_id).execute()
                continue
            if job.status in (Status.ACTIVE, Status.ABORTING):
                if not job.stuck:
                    continue
            elif seen.get(job_id) != job_bytes:
                self._not_started[job_id] = job_bytes  # maybe between BLMOVE and the status write
                continue
            swept.append(job_id)
            stuck.append(job)
        # all at once: each waits up to ``abort`` s for a worker to finish it, and a killed worker
        # leaves as many stuck jobs as it ran at once (SAQ waits for them one after the other)
        await asyncio.gather(*(self._requeue(job, abort) for job in stuck))
        return [job_id.decode() for job_id in swept]

    def _malformed(self, job_id: bytes, job_bytes: bytes, exc: Exception) -> None:
        """Skip a record that is not a job (foreign or damaged): logged once per id and process,
        left where it is for a person to look at."""
        if job_id in self._skipped:
            return
        self._skipped.add(job_id)
        shown = repr(job_bytes)[:80]
        log.warning("sweep skips %s: its record is not a job (%s: %s): %s",
                    job_id.decode(errors="replace"), type(exc).__name__, exc, shown)

    async def _requeue(self, job: Job, abort: float) -> None:
        log.warning("sweeping %s (status %s, attempts %d)", job.key, job.status, job.attempts)
        if job.status not in (Status.ACTIVE, Status.ABORTING):
            # never started (its worker died between BLMOVE and the status write): no copy runs that an
            # abort would have to stop, so straight back to ``queued``, in SAQ's one-transaction retry.
            # SAQ's abort first takes the job out of ``active`` and its retry puts it back 0-5 s later:
            # a sweeping worker killed in between (a crash loop) left the job in no list at all, lost
            await self.retry(job, error=self.swept_error_message)
            return
        await self.abort(job, error=self.swept_error_message)
        try:
            await job.refresh(abort)
        except TimeoutError:
            pass  # nobody finished it: its worker is gone
        except RuntimeError:
            return  # finished meanwhile and its record deleted (ttl=-1)
        if job.status in (Status.COMPLETE, Status.FAILED):
            return
        if job.retryable:
            await self.retry(job, error=self.swept_error_message)
        else:
            await self.finish(job, Status.ABORTED, error=self.swept_error_message)


class _Worker(Worker):  # type: ignore[misc,unused-ignore]
    """SAQ's worker whose upkeep loops stop as soon as the worker stops.

    SAQ's upkeep loops sleep with ``asyncio.sleep`` (the sweep for its whole interval), and
    ``Worker.stop`` waits for them with the running jobs: every SIGTERM would take the whole grace
    period and then cancel. Here they wait on the stop event instead.
    """

    async def upkeep(self) -> list[asyncio.Task[None]]:
        async def poll(func: Callable[[int], Awaitable[Any]], every: int, arg: int | None = None) -> None:
            while not self.event.is_set():
                try:
                    await func(arg or every)
                except Exception:
                    if self.event.is_set():
                        return
                    log.exception("SAQ upkeep task failed")
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(every):
                        await self.event.wait()

        timers = self.timers
        loops: list[Coroutine[Any, Any, None]] = [
            poll(self.abort, timers["abort"]),
            poll(self.schedule, timers["schedule"]),
            poll(self.queue.sweep, timers["sweep"]),
            poll(self.worker_info, timers["worker_info"], timers["worker_info"] + 1),
        ]
        return [asyncio.create_task(loop) for loop in loops]


async def work(queue: Queue, ctx: WorkerContext) -> None:
    """A SAQ worker on ``queue`` (Redis's or PostgreSQL's) until SIGTERM/SIGINT: the backend's one
    function, ``--concurrency`` slots, the sweep every ``task_timeout / 4`` s, the stop's grace."""
    settings = ctx.settings
    execute = ctx.execute

    async def run(_: dict[str, Any], *, payload: dict[str, Any]) -> None:
        await execute(TaskMessage.from_dict(payload))

    async def startup(_: dict[str, Any]) -> None:
        await ctx.ready()

    common: dict[str, Any] = {"functions": [(FUNCTION, run)], "concurrency": settings.concurrency,
                              "startup": startup, "timers": {"sweep": sweep_interval(settings)},
                              "dequeue_timeout": DEQUEUE_TIMEOUT}
    if LEGACY:  # 0.12 has no shutdown grace and no connect(): its Worker as it came
        worker = Worker(queue, **common)
    else:
        worker = _Worker(queue, **common, shutdown_grace_period_s=settings.shutdown_timeout,
                         cancellation_hard_deadline_s=1.0)
        await connect(queue)
    try:
        await worker.start()  # returns after SIGTERM/SIGINT, once stopped
    finally:
        await queue.disconnect()


async def connect(queue: Queue) -> None:
    """Open the queue's connections (SAQ 0.13 and later; 0.12's queue connects on first use)."""
    if not LEGACY:
        await queue.connect()


class Producer:
    """Enqueues as SAQ's documentation shows, on a Redis or a PostgreSQL queue: the job key, the options."""

    def __init__(self, queue: Queue, settings: Settings) -> None:
        self._queue = queue
        self._settings = settings
        self._timeout = _seconds(settings.task_timeout)

    async def enqueue(self, task: TaskMessage, later: BackgroundTasks) -> None:
        job = await self._queue.enqueue(
            FUNCTION,
            key=job_key(self._settings, task.task_id),
            timeout=self._timeout,
            heartbeat=self._timeout,
            retries=Options.of(self._settings).retries,
            ttl=-1,
            payload=task.to_dict(),
        )
        if job is None:  # a job of this key is still queued or running (SAQ forgets finished ones)
            raise DuplicateTask(task.task_id)


def _queue(settings: Settings, connections: int, max_ops: int = 20, *, worker: bool = False) -> Queue:
    return (Queue if LEGACY else _Queue)(
        _client(settings, connections, worker=worker),
        name=queue_name(settings),
        dump=json.dumps,
        load=json.loads,
        max_concurrent_ops=max_ops,
    )


class SaqBackend:
    @asynccontextmanager
    async def producer(self, ctx: ServiceContext) -> AsyncIterator[Producer]:
        connections = ctx.settings.redis_max_connections
        # SAQ throttles its operations (the enqueue among them) to max_ops at once: that bounds the
        # connections in use; the rest of the pool is for the broker probe's PING
        queue = _queue(ctx.settings, connections, max_ops=connections - min(RESERVED, connections // 2))
        await connect(queue)
        try:
            yield Producer(queue, ctx.settings)
        finally:
            await queue.disconnect()

    async def run_worker(self, ctx: WorkerContext) -> None:
        settings = ctx.settings
        # each slot holds a connection while it blocks in BLMOVE, plus room for job updates
        await work(_queue(settings, settings.concurrency + settings.redis_max_connections, worker=True), ctx)

    async def queue_depth(self, settings: Settings, redis: aioredis.Redis) -> int:
        # the list BLMOVE takes job ids from: queued, not yet started
        return int(await redis.llen(f"saq:{queue_name(settings)}:queued"))

    async def run_dashboard(self, settings: Settings, host: str, port: int, auth: str | None) -> None:
        """SAQ's web UI (it can retry and abort jobs: loopback, or basic auth)."""
        from saq.web.starlette import saq_web

        queue = _queue(settings, 8)
        await connect(queue)
        try:
            await serve_asgi(saq_web("", [queue]), host, port, auth)
        finally:
            await queue.disconnect()

    async def purge(self, settings: Settings) -> None:
        pass  # Redis only: the harness deletes the run's keys


backend = SaqBackend()
