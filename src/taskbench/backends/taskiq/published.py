"""taskiq (taskiq-redis ``RedisStreamBroker``): N no-op tasks kicked, then one receiver drains them.

The shape of streaq's benchmarks/bench_taskiq.py (20,000 kicked 32 at a time, ``xread_count=32``, a
result backend with ``result_ex_time=1``, ``taskiq worker --max-async-tasks 32 --max-prefetch 32`` with
one worker) and of python_queue_benchmark's taskiq/ (20,000 awaited one by one, ``taskiq worker
--workers 10`` folded into one worker of 10 tasks at once). taskiq has no burst mode: the drain ends
at the last task's finish. The commits are in :mod:`taskbench.backends.shapes`.
"""

from __future__ import annotations

import asyncio
import time

from taskiq.receiver import Receiver
from taskiq_redis import RedisAsyncResultBackend, RedisStreamBroker

from taskbench.backends._published import Done, cpu_seconds, enqueue_async, options, report

done = Done()


async def main() -> None:
    args = options()
    stream = f"{args.prefix}taskiq"
    broker = RedisStreamBroker(args.redis_url, queue_name=stream, consumer_group_name=stream,
                               xread_count=int(args.options.get("xread_count", 100)))
    if "result_ex_time" in args.options:
        broker = broker.with_result_backend(RedisAsyncResultBackend(
            args.redis_url, result_ex_time=int(args.options["result_ex_time"]), prefix_str=stream))

    @broker.task(task_name="noop")  # type: ignore[untyped-decorator,unused-ignore]
    async def noop(n: int) -> None:
        done.hit()

    await broker.startup()  # makes the consumer group before the first task, as the published enqueue does
    enqueue_s = await enqueue_async(args, lambda i: noop.kiq(i))
    broker.is_worker_process = True
    receiver = Receiver(broker, max_async_tasks=args.concurrency, run_startup=False,
                        max_prefetch=int(args.options.get("max_prefetch", 0)))
    finish = asyncio.Event()
    cpu, started = cpu_seconds(), time.time()
    listening = asyncio.create_task(receiver.listen(finish))
    await done.await_all(args.tasks, args.timeout)
    ended, cpu = done.last, cpu_seconds() - cpu
    finish.set()
    await asyncio.wait_for(listening, 30)
    await broker.shutdown()
    report(args, enqueue_s=enqueue_s, started=started, ended=ended, executed=done.count, cpu_s=cpu)


if __name__ == "__main__":
    asyncio.run(main())
