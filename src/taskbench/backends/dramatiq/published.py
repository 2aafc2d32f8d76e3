"""Dramatiq (``RedisBroker``): N no-op messages sent one by one, then one worker of 10 threads drains them.

The shape of python_queue_benchmark's dramatiq/: 20,000 ``send`` one by one, then ``dramatiq tasks -p 1
-t 10``, the drain timed from the worker's start to the last task's finish. The commit is in
:mod:`taskbench.backends.shapes`.
"""

from __future__ import annotations

import time

import dramatiq
from dramatiq.brokers.redis import RedisBroker

from taskbench.backends._published import Done, cpu_seconds, enqueue_sync, options, report

done = Done()


def main() -> None:
    args = options()
    broker = RedisBroker(url=args.redis_url, namespace=f"{args.prefix}dramatiq")  # the library's default middleware
    dramatiq.set_broker(broker)

    @dramatiq.actor(actor_name="noop", broker=broker)  # type: ignore[untyped-decorator,unused-ignore]
    def noop(n: int) -> None:
        done.hit()

    enqueue_s = enqueue_sync(args, noop.send)
    worker = dramatiq.Worker(broker, worker_threads=args.concurrency)
    cpu, started = cpu_seconds(), time.time()
    worker.start()
    try:
        done.wait(args.tasks, args.timeout)
    finally:
        worker.stop()
        broker.close()
    report(args, enqueue_s=enqueue_s, started=started, ended=done.last, executed=done.count,
           cpu_s=cpu_seconds() - cpu)


if __name__ == "__main__":
    main()
