"""Celery: N no-op tasks sent one by one, then one worker of 10 threads drains them.

The shape of python_queue_benchmark's celery/: 20,000 ``delay`` one by one on a Redis broker with a Redis
result backend, then ``celery -A tasks worker -c 10 -P threads``, the drain timed from the worker's
start to the last task's finish. Every key is under the run's prefix (kombu's ``global_keyprefix``, on
the broker and the result backend). The commit is in :mod:`taskbench.backends.shapes`.
"""

from __future__ import annotations

import threading
import time

from celery import Celery
from celery.worker import WorkController, state

from taskbench.backends._published import Done, cpu_seconds, enqueue_sync, options, report

done = Done()


def main() -> None:
    args = options()
    results = args.options.get("result_backend", "1") == "1"
    app = Celery("parity", broker=args.redis_url, backend=args.redis_url if results else None,
                 set_as_current=False)
    app.conf.update(task_default_queue=f"{args.prefix}celery",
                    broker_transport_options={"global_keyprefix": args.prefix},
                    result_backend_transport_options={"global_keyprefix": args.prefix},
                    worker_hijack_root_logger=False, broker_connection_retry_on_startup=True)

    @app.task(name="noop")  # type: ignore[untyped-decorator,unused-ignore]
    def noop(n: int) -> None:
        done.hit()

    enqueue_s = enqueue_sync(args, noop.delay)
    worker = WorkController(app=app, pool_cls=args.options.get("pool", "threads"), concurrency=args.concurrency,
                            queues=[f"{args.prefix}celery"], loglevel="WARNING")
    cpu, started = cpu_seconds(), time.time()
    serving = threading.Thread(target=worker.start, daemon=True)
    serving.start()
    try:
        done.wait(args.tasks, args.timeout)
    finally:
        state.should_stop = 0  # Celery's own warm shutdown, seen by the consumer between two reads
        serving.join(30)
    report(args, enqueue_s=enqueue_s, started=started, ended=done.last, executed=done.count,
           cpu_s=cpu_seconds() - cpu)


if __name__ == "__main__":
    main()
