"""arq: N no-op jobs enqueued, then one worker drains them in burst mode.

The shape of streaq's benchmarks/bench_arq.py (20,000 jobs gathered 32 at a time, ``max_jobs = 32``,
``arq --burst``), of SAQ's benchmarks/simple.py ``bench_arq`` (1,000 gathered 20 at a time,
``max_jobs=10``, ``burst=True``) and of python_queue_benchmark's arq/ (20,000 awaited one by one,
``poll_delay = 0.01``; its 10 supervisord processes folded into one worker of concurrency 10). The
commits are in :mod:`taskbench.backends.shapes`.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from arq import create_pool
from arq.connections import RedisSettings
from arq.worker import Worker, func

from taskbench.backends._published import Done, cpu_seconds, enqueue_async, options, report

done = Done()


async def noop(ctx: dict[str, Any], n: int) -> int:
    done.hit()
    return 1


async def main() -> None:
    args = options()
    queue = f"{args.prefix}arq:queue"
    redis = RedisSettings.from_dsn(args.redis_url)
    pool = await create_pool(redis, default_queue_name=queue)
    # job ids under the run prefix, so that every key arq makes (job, result, in-progress) is the run's
    enqueue_s = await enqueue_async(args, lambda i: pool.enqueue_job("noop", i, _job_id=f"{args.prefix}{i}"))
    worker = Worker(functions=[func(noop, name="noop")], redis_settings=redis, queue_name=queue,
                    max_jobs=args.concurrency, burst=True, handle_signals=False, log_results=False,
                    poll_delay=float(args.options.get("poll_delay", 0.5)))
    cpu, started = cpu_seconds(), time.time()
    await asyncio.wait_for(worker.main(), args.timeout)
    ended = done.last if args.timing == "last-finish" else time.time()
    cpu = cpu_seconds() - cpu
    await worker.close()
    await pool.aclose()
    report(args, enqueue_s=enqueue_s, started=started, ended=ended, executed=done.count, cpu_s=cpu)


if __name__ == "__main__":
    asyncio.run(main())
