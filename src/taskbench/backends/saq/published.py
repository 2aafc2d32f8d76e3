"""SAQ: N no-op jobs enqueued, then one worker drains them.

The shape of SAQ's own benchmarks/simple.py ``bench_saq`` (1,000 jobs gathered, 20 at once: the script's
``asyncio.Semaphore(20)``, the same as its ``bench_arq``; a worker of
concurrency 10, the drain timed by polling ``queue.count("incomplete")`` every 0.1 s) and of streaq's
benchmarks/bench_saq.py (20,000 gathered 32 at a time, concurrency 32, ``burst``, ``dequeue_timeout=1``,
timed from the worker's startup to its shutdown). The commits are in :mod:`taskbench.backends.shapes`.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from saq import Queue, Worker

from taskbench.backends._published import Done, cpu_seconds, enqueue_async, options, report

done = Done()


async def noop(ctx: dict[str, Any]) -> int:
    done.hit()
    return 1


async def main() -> None:
    args = options()
    queue = Queue.from_url(args.redis_url, name=f"{args.prefix}saq")  # keys saq:<queue>:…, the run's
    if hasattr(queue, "connect"):  # SAQ 0.12 (seed 000's) connects on first use and has no connect()
        await queue.connect()
    enqueue_s = await enqueue_async(args, lambda i: queue.enqueue("noop"))
    burst = args.timing == "burst"
    # `burst` only where the shape asks for it: SAQ 0.12 (seed 000's) has no such argument, and its
    # own benchmarks/simple.py polls the count instead
    worker = Worker(queue, functions=[noop], concurrency=args.concurrency,
                    dequeue_timeout=float(args.options.get("dequeue_timeout", 0)), **({"burst": True} if burst else {}))
    cpu, started = cpu_seconds(), time.time()
    running = asyncio.create_task(worker.start())
    if burst:
        await asyncio.wait_for(running, args.timeout)
    else:  # SAQ's simple.py: the incomplete jobs counted every 0.1 s
        deadline = time.monotonic() + args.timeout
        while await queue.count("incomplete") and time.monotonic() < deadline:  # noqa: ASYNC110 (a count in Redis)
            await asyncio.sleep(0.1)
    ended = time.time()
    cpu = cpu_seconds() - cpu
    if not burst:
        await worker.stop()
    await queue.disconnect()
    report(args, enqueue_s=enqueue_s, started=started, ended=ended, executed=done.count, cpu_s=cpu)


if __name__ == "__main__":
    asyncio.run(main())
