"""streaq: N no-op tasks enqueued in bulk, then one worker drains them in burst mode.

The shape of streaq's own benchmarks/bench_streaq.py: 20,000 tasks through ``worker.enqueue_many``
(one pipeline), ``Worker(concurrency=32, anyio_kwargs={"use_uvloop": True})``, drained by
``streaq run --burst`` with one worker. The commit is in :mod:`taskbench.backends.shapes`.
"""

from __future__ import annotations

import time

import anyio
from streaq import Worker

from taskbench.backends._published import Done, cpu_seconds, options, report

done = Done()


def main() -> None:
    args = options()
    uvloop = args.options.get("uvloop", "1") == "1"
    worker = Worker(redis_url=args.redis_url, queue_name=f"{args.prefix}streaq", concurrency=args.concurrency,
                    handle_signals=False, anyio_kwargs={"use_uvloop": True} if uvloop else {})

    @worker.task(name="noop")  # type: ignore[untyped-decorator,unused-ignore]
    async def noop(n: int) -> None:
        done.hit()

    async def run() -> None:
        started = time.perf_counter()
        async with worker:
            await worker.enqueue_many([noop.enqueue(i) for i in range(args.tasks)])
        enqueue_s = time.perf_counter() - started
        worker.burst = True  # what `streaq run --burst` sets
        cpu, started = cpu_seconds(), time.time()
        with anyio.fail_after(args.timeout):
            await worker.run_async()
        ended = done.last if args.timing == "last-finish" else time.time()
        report(args, enqueue_s=enqueue_s, started=started, ended=ended, executed=done.count,
               cpu_s=cpu_seconds() - cpu)

    anyio.run(run, backend_options={"use_uvloop": True} if uvloop else {})


if __name__ == "__main__":
    main()
