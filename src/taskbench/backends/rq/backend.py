"""RQ: the API enqueues with ``Queue.enqueue`` off its event loop; RQ's forking workers, a pool of them, run tasks.

Wiring (RQ 3.0; the source cited is ``rq/`` of that release), and why:
- every key under the run's prefix ``<run prefix>rq``: RQ reads ``RQ_KEY_PREFIX`` once, when it is
  imported (``rq/defaults.py``), so a worker process (one run) imports ``rq`` only after setting it
  (queues, jobs, registries, workers, the ``rq:queues`` and ``rq:workers`` sets: all the run's own); the
  producer, which may serve several runs in one process (``taskbench drain`` enqueues two), uses a
  ``Queue`` and a ``Job`` subclass with the run's prefixes instead (their class attributes
  ``redis_queue_namespace_prefix``, ``redis_queues_keys``, ``redis_job_namespace_prefix``: the keys an
  enqueue touches);
- JSON (``rq.serializers.JSONSerializer``, on both sides) rather than RQ's default pickle;
- the task id is the job id (``-``/``_`` only in an RQ id: ``_`` ``.`` ``:`` are escaped) with
  ``unique=True``: one Lua script checks that no job hash of that id exists, saves the job and pushes
  it (``save_unique_job``, ``rq/scripts.py``), so a known id raises ``DuplicateJobError`` (the producer
  raises DuplicateTask). With ``idempotency`` on, a finished job is kept for ``REMEMBER_IDS``
  (``result_ttl``), so RQ refuses its id for the whole run; off, ``result_ttl=0`` deletes it;
- ``Queue.enqueue`` is blocking I/O: the API runs it on the shared producer threads
  (:mod:`._sync_producer`), over a blocking connection pool of as many connections, whose socket timeout
  is ``--enqueue-timeout``;
- the worker is RQ's standard forking ``Worker`` (a work horse forked per job), ``--concurrency`` of
  them per taskbench worker process, started and restarted as ``rq worker-pool`` does it
  (``rq.worker_pool.WorkerPool``: ``start_worker``, ``handle_dead_worker``, SIGINT to stop); this
  process's event loop supervises them. RQ's ``--concurrency`` has no in-process meaning;
- a job runs in the horse, where the parent's event loop is not: :mod:`._forked` runs the workload
  there and records it with ``Ledger.record_sync`` over the horse's own connection. The pool worker
  keeps the task metrics around its horse (the horse exits with a code that tells success, failure or a
  second run); a horse per job writing metric files of its own would leave one per task;
- RQ puts the horse in a process group of its own (``os.setpgrp`` in ``Worker.fork_work_horse``,
  ``rq/worker/worker_classes.py``): a SIGKILL of the worker's group would leave it running, its job
  finishing after its worker "died". The one addition here: the horse, and each pool worker, get
  ``PR_SET_PDEATHSIG`` = SIGKILL, so they die with their parent as the processes of a lost container do;
- SIGTERM (the group's) and then the pool's SIGINT start RQ's warm shutdown (a second signal within 1 s
  is ignored, ``request_force_stop``): each worker finishes its horse's job and exits; past
  ``--stop-timeout`` a second SIGINT is RQ's cold shutdown, which kills the horse.

The promise across a dead worker, from the source. The pool worker writes an execution of the job to
the queue's StartedJobRegistry with a score of now + heartbeat TTL and renews it every
``job_monitoring_interval`` (30 s) while the horse lives; the TTL is ``min(job timeout,
job_monitoring_interval) + 60`` s (``get_heartbeat_ttl``, ``maintain_heartbeats``). When the worker and
its horse die, nobody renews it. A worker's maintenance (``clean_registries``: first at start, then once
``maintenance_interval`` passed, checked after each job and each blocking dequeue, which returns every
``worker_ttl - 15`` s on an idle queue) runs ``StartedJobRegistry.cleanup``: an expired entry whose job
is still ``started`` is an ``AbandonedJobError``; with retries left (``Retry``) the job is enqueued again
(``job.retry``), otherwise it is moved to the FailedJobRegistry and never runs (``rq/registry.py``).
So ``rq`` is at-most-once (a dead worker's job is failed after the TTL) and ``rq-retry``, the same
wiring with ``Retry(max=RETRIES)``, at-least-once: back after the TTL plus up to a maintenance interval
and a dequeue timeout. A job a dead worker had moved to the intermediate queue but not started is in
the started registry too, with status ``queued``: that maintenance's registry cleanup skips it and drops
its entry, ``IntermediateQueue.cleanup`` then notes it as first seen, and a maintenance over 60 s later
fails it (``rq``) or enqueues it again (``rq-retry``): two maintenances after the others (measured with
RQ's defaults: 6 of a killed pool's 10 jobs; ``backends.rq_retry_after``). A broker restart: the
workers' dequeue retries a lost connection (``dequeue_job_and_maintain_ttl``), a horse that cannot
reach Redis fails its job, and what the broker kept (``--redis-fsync always``) is still queued.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import signal
import sys
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

from taskbench.backends._forked import ForkedBody, die_with_parent, measured
from taskbench.backends._sync_producer import SyncProducer, sync_producer
from taskbench.backends._worker import stop_requested
from taskbench.backends.base import DuplicateTask, ServiceContext, WorkerContext
from taskbench.backends.rq import Options
from taskbench.messages import TaskMessage

if TYPE_CHECKING:
    import redis
    import redis.asyncio as aioredis
    from fastapi import BackgroundTasks

    from taskbench.settings import Settings

FUNCTION = "taskbench.backends.rq.backend.execute"
QUEUE = "taskbench"
#: how long RQ keeps a finished job, and so refuses its id again: longer than any run
REMEMBER_IDS = 30 * 86_400
#: rq-retry: RQ re-runs an abandoned (or failed) job up to this many times
RETRIES = 3
#: exit codes of a horse, for its pool worker's metrics (RQ's horse exits 0 either way)
RAN_ONCE, RAN_AGAIN, FAILED = 0, 10, 11
#: how often the pool's supervisor checks its workers (``rq worker-pool``: every second)
CHECK_INTERVAL = 1.0


def key_prefix(settings: Settings) -> str:
    return f"{settings.prefix}rq"


def import_rq(settings: Settings) -> Any:
    """``rq``, imported with the run's key prefix (RQ reads ``RQ_KEY_PREFIX`` once, at import)."""
    wanted = key_prefix(settings)
    if "rq" not in sys.modules:
        os.environ["RQ_KEY_PREFIX"] = wanted
    import rq
    import rq.defaults

    if wanted != rq.defaults.RQ_KEY_PREFIX:
        raise RuntimeError(f"rq was imported with key prefix {rq.defaults.RQ_KEY_PREFIX!r}, not {wanted!r}: "
                           "one run per process")
    return rq


def job_id(task_id: str) -> str:
    """An RQ job id (letters, digits, ``_``, ``-``) for a task id, one to one: ``_`` ``.`` ``:`` escaped."""
    return task_id.replace("_", "__").replace(".", "_d").replace(":", "_c")


# -- the API -----------------------------------------------------------------------------------------


class _Producer:
    def __init__(self, queue: Any, threads: SyncProducer, options: dict[str, Any]) -> None:
        self._threads = threads
        self._enqueue = functools.partial(queue.enqueue, FUNCTION, unique=True, **options)
        from rq.exceptions import DuplicateJobError

        self._duplicate = DuplicateJobError

    async def enqueue(self, task: TaskMessage, later: BackgroundTasks) -> None:
        try:
            await self._threads.run(functools.partial(self._enqueue, task.to_dict(), job_id=job_id(task.task_id)))
        except self._duplicate:
            raise DuplicateTask(task.task_id) from None


def job_options(settings: Settings, retry: bool) -> dict[str, Any]:
    """The options of every job: its timeout, how long it is kept, and ``Retry`` for rq-retry."""
    from rq import Retry

    return {"job_timeout": max(1, round(settings.task_timeout)),
            "result_ttl": REMEMBER_IDS if settings.idempotency else 0,
            **({"retry": Retry(max=RETRIES)} if retry else {})}


def open_queue(settings: Settings, connection: redis.Redis) -> Any:
    """The run's queue for enqueueing, whatever ``RQ_KEY_PREFIX`` this process imported ``rq`` with."""
    from rq import Queue
    from rq.job import Job
    from rq.serializers import JSONSerializer

    prefix = key_prefix(settings)

    class RunJob(Job):  # type: ignore[misc]
        redis_job_namespace_prefix = f"{prefix}:job:"

    class RunQueue(Queue):  # type: ignore[misc]
        redis_queue_namespace_prefix = f"{prefix}:queue:"
        redis_queues_keys = f"{prefix}:queues"

    return RunQueue(QUEUE, connection=connection, job_class=RunJob, serializer=JSONSerializer)


# -- the worker ----------------------------------------------------------------------------------------

#: the forked children's task body, set by ``run_worker`` before the pool forks
_BODY: ForkedBody | None = None
_RUNS = 0  # in a horse: what the ledger said of its job
_SUPERVISOR = 0  # the pid of the taskbench worker process that supervises the pool


def execute(payload: dict[str, Any]) -> None:
    """The job's function, run in RQ's work horse."""
    global _RUNS
    assert _BODY is not None, "taskbench's RQ job runs in a worker started by taskbench"
    _RUNS = _BODY.run(payload)


def _worker_class(settings: Settings) -> type[Any]:
    from rq import Worker

    class TaskbenchWorker(Worker):  # type: ignore[misc]
        """RQ's forking Worker with the run's TTL and maintenance interval; dies with its parent."""

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            if os.getppid() == _SUPERVISOR:  # a pool worker, made in the forked child: first thing
                die_with_parent()
            options = Options.of(settings)
            kwargs.setdefault("worker_ttl", options.worker_ttl)
            kwargs.setdefault("maintenance_interval", options.maintenance_interval)
            super().__init__(*args, **kwargs)
            self._horse_status: list[int] = []  # the wait status of the last horse, once it was reaped

        def main_work_horse(self, job: Any, queue: Any) -> None:
            die_with_parent()
            super().main_work_horse(job, queue)

        def perform_job(self, job: Any, queue: Any, execution: Any) -> bool:
            ok: bool = super().perform_job(job, queue, execution)
            if self.is_horse:  # the horse exits here instead of in main_work_horse, with what happened
                failed = not ok or (_BODY is not None and _BODY.failed_last)  # a user's task that raised
                os._exit(FAILED if failed else RAN_AGAIN if _RUNS > 1 else RAN_ONCE)
            return ok

        def wait_for_horse(self) -> tuple[int | None, int | None, Any]:
            pid, status, rusage = super().wait_for_horse()
            if pid is not None and status is not None:
                self._horse_status[:] = [status]
            return pid, status, rusage

        def execute_job(self, job: Any, queue: Any) -> None:
            task = TaskMessage.from_dict(job.args[0])
            self._horse_status.clear()
            with measured(settings.backend, task) as outcome:
                super().execute_job(job, queue)
                code = os.waitstatus_to_exitcode(self._horse_status[0]) if self._horse_status else None
                outcome.append(code in (RAN_ONCE, RAN_AGAIN))
                if code == RAN_AGAIN:
                    from taskbench.metrics import task_metrics

                    task_metrics(settings.backend).task(task.workload).redelivered.inc()

    return TaskbenchWorker


class RqBackend:
    def __init__(self, *, retry: bool = False) -> None:
        self.retry = retry

    @asynccontextmanager
    async def producer(self, ctx: ServiceContext) -> AsyncIterator[_Producer]:
        settings = ctx.settings
        import redis

        async with sync_producer(settings, "rq") as threads:
            pool = threads.redis_pool(settings.broker_address)
            connection = redis.Redis(connection_pool=pool)
            try:
                yield _Producer(open_queue(settings, connection), threads, job_options(settings, self.retry))
            finally:
                connection.close()
                pool.disconnect()

    async def run_worker(self, ctx: WorkerContext) -> None:
        global _BODY, _SUPERVISOR
        settings = ctx.settings
        import_rq(settings)
        import redis
        from rq.serializers import JSONSerializer
        from rq.worker_pool import WorkerPool

        _BODY, _SUPERVISOR = ForkedBody(settings), os.getpid()
        connection = redis.Redis.from_url(settings.broker_address)
        pool = WorkerPool([QUEUE], connection=connection, num_workers=settings.concurrency,
                          worker_class=_worker_class(settings), serializer=JSONSerializer)
        pool.status = pool.Status.STARTED
        with stop_requested() as stopping:
            try:
                pool.start_workers(burst=False, logging_level="WARNING")
                await self._wait_registered(pool, settings, stopping)
                await ctx.ready()
                while not stopping.is_set():
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(stopping.wait(), CHECK_INTERVAL)
                    _check_workers(pool)
            finally:
                await _stop_workers(pool, settings.shutdown_timeout)
                connection.close()

    @staticmethod
    async def _wait_registered(pool: Any, settings: Settings, stopping: asyncio.Event) -> None:
        """Until every pool worker registered with RQ (it dequeues right after)."""
        from rq import Worker

        queue = pool.queues[0]
        while not stopping.is_set() and Worker.count(queue=queue) < pool.num_workers:
            _check_workers(pool)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stopping.wait(), 0.05)

    async def queue_depth(self, settings: Settings, redis: aioredis.Redis) -> int:
        # the queue's list and the jobs being run (the started registry)
        prefix = key_prefix(settings)
        queued, running = await asyncio.gather(redis.llen(f"{prefix}:queue:{QUEUE}"),
                                               redis.zcard(f"{prefix}:wip:{QUEUE}"))
        return int(queued) + int(running)

    async def purge(self, settings: Settings) -> None:
        pass  # Redis only, every key under the run's prefix: the harness deletes them


def _check_workers(pool: Any) -> None:
    """``WorkerPool.check_workers`` without its 0.1 s join per worker: a dead worker is replaced."""
    for data in list(pool.worker_dict.values()):
        if not data.process.is_alive():
            data.process.join()
            pool.handle_dead_worker(data)
    if pool.status != pool.Status.STOPPED:
        for _ in range(pool.num_workers - len(pool.worker_dict)):
            pool.start_worker(burst=False, logging_level="WARNING")


async def _stop_workers(pool: Any, timeout: float) -> None:
    """RQ's warm shutdown (SIGINT: finish the horse's job), then past ``timeout`` its cold one, then SIGKILL."""
    pool.status = pool.Status.STOPPED
    processes = [data.process for data in pool.worker_dict.values()]
    for sig, wait in ((signal.SIGINT, timeout), (signal.SIGINT, 2.0), (signal.SIGKILL, 2.0)):
        alive = [p for p in processes if p.is_alive()]
        if not alive:
            break
        for process in alive:
            with contextlib.suppress(ProcessLookupError):
                os.kill(process.pid, sig)
        deadline = time.monotonic() + wait
        while any(p.is_alive() for p in alive):
            if time.monotonic() > deadline:
                break
            await asyncio.sleep(0.05)
    for process in processes:
        process.join(0)


backend = RqBackend()
