"""RQ: N no-op jobs enqueued one by one, then drained in burst mode by forking workers.

The shape of python_queue_benchmark's rq/ (20,000 ``queue.enqueue`` one by one, ``rq worker-pool -n 10``,
the drain timed from the pool's start to the last job's end) and of SAQ's benchmarks/simple.py ``bench_rq``
(1,000 jobs, one ``Worker`` with ``log_job_description=False``, ``work(burst=True)``). Every key is under
the run's prefix (``RQ_KEY_PREFIX``, read by rq when it is imported). The commits are in
:mod:`taskbench.backends.shapes`.
"""

from __future__ import annotations

import os
import sys
import time

FUNCTION = "taskbench.backends.rq.published.noop"  # imported by the work horse


def noop(n: int) -> int:
    return 1


def main() -> None:
    from taskbench.backends._published import cpu_seconds, enqueue_sync, options, report

    args = options()
    os.environ["RQ_KEY_PREFIX"] = f"{args.prefix}rq"  # before rq is imported: it reads it once
    from redis import Redis
    from rq import Queue, Worker
    from rq.job import Job
    from rq.worker_pool import WorkerPool

    connection = Redis.from_url(args.redis_url)
    queue = Queue("default", connection=connection)
    ids: list[str] = []
    enqueue_s = enqueue_sync(args, lambda i: ids.append(queue.enqueue(FUNCTION, i).id))
    cpu, started = cpu_seconds(), time.time()
    if args.concurrency == 1:  # SAQ's bench_rq: one worker forking a horse per job
        worker = Worker([queue], connection=connection, log_job_description=False)
        worker.log_result_lifespan = False
        worker.work(burst=True, logging_level="WARNING", max_idle_time=args.timeout)
    else:  # `rq worker-pool -n N`, in burst mode so that it returns once the queue is empty
        WorkerPool([queue], connection=connection, num_workers=args.concurrency).start(
            burst=True, logging_level="WARNING")
    ended, cpu = time.time(), cpu_seconds() - cpu
    jobs = [job for job in Job.fetch_many(ids, connection=connection) if job is not None]
    finished = [job for job in jobs if job.get_status(refresh=False) == "finished"]
    if args.timing == "last-finish":  # the last job's end, as RQ recorded it
        ended = max(job.ended_at.timestamp() for job in finished if job.ended_at)
    if len(finished) < args.tasks:
        sys.exit(f"the workers stopped with {len(finished)} of {args.tasks} jobs finished")
    report(args, enqueue_s=enqueue_s, started=started, ended=ended, executed=len(finished), cpu_s=cpu)


if __name__ == "__main__":
    main()
