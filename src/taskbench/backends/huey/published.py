"""Huey (``RedisHuey``): N no-op tasks enqueued one by one, then one consumer of 10 threads drains them.

The shape of python_queue_benchmark's huey/: 20,000 calls of the task one by one, then
``huey_consumer.py tasks.huey -k thread -w 10 -d 0.001 -C -q``, the drain timed from the consumer's
start to the last task's finish. The commit is in :mod:`taskbench.backends.shapes`.
"""

from __future__ import annotations

import time

from huey import RedisHuey

from taskbench.backends._published import Done, cpu_seconds, enqueue_sync, options, report

done = Done()


def main() -> None:
    args = options()
    # named like taskbench's huey backend: every key is huey.<kind>.taskbench.<run id>
    huey = RedisHuey(f"taskbench.{args.run_id}", url=args.redis_url, clean_name=False)

    @huey.task(name="noop")  # type: ignore[untyped-decorator,unused-ignore]
    def noop(n: int) -> None:
        done.hit()

    enqueue_s = enqueue_sync(args, noop)
    consumer = huey.create_consumer(workers=args.concurrency, worker_type=args.options.get("worker_type", "thread"),
                                    initial_delay=float(args.options.get("initial_delay", 0.1)),
                                    check_worker_health=args.options.get("check_worker_health", "1") == "1")
    cpu, started = cpu_seconds(), time.time()
    consumer.start()
    try:
        done.wait(args.tasks, args.timeout)
    finally:
        consumer.stop(graceful=True)
    report(args, enqueue_s=enqueue_s, started=started, ended=done.last, executed=done.count,
           cpu_s=cpu_seconds() - cpu)


if __name__ == "__main__":
    main()
