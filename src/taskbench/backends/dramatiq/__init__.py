"""Dramatiq: the Redis broker, acks after the actor returned, dead workers' messages requeued."""

from __future__ import annotations

from typing import Final

from taskbench.backends.bounds import LOST, PER_SLOT, PER_WORKER, RESTART_BROKER, Bound
from taskbench.backends.declaration import BackendInfo, Delivery
from taskbench.backends.shapes import Shape

#: the window Dramatiq's source opens on Redis (read at the version locked in uv.lock)
REDIS_BOUNDS: Final = (
    Bound(figure=LOST, faults=RESTART_BROKER, tasks=2, per=(PER_WORKER, PER_SLOT),
          text="the messages its consumer had prefetched when the connection broke: the fetch script moved "
               "them to the worker's ack set, the new consumer forgets them, and only a stopped heartbeat "
               "(the worker's exit) re-queues them; the prefetch is 2 x worker threads (--concurrency)",
          source="dramatiq 2.2 dramatiq/worker.py ConsumerThread.run (a new consumer on a connection error), "
                 "dramatiq/brokers/redis.py _RedisConsumer.__next__, Worker.queue_prefetch; docs/faults.md"),
)

BACKENDS = (
    BackendInfo(
        name="dramatiq",
        time_limit="Dramatiq's TimeLimit",
        port=8008,
        rank=70,
        summary="Dramatiq: Redis broker, acks after the actor returned, dead workers' messages requeued",
        threading="threads",
        default_delivery=Delivery(recovery="acks after the actor returned: a dead worker's unacked messages "
                                           "are requeued by another worker's heartbeat check",
                                  source="dramatiq 2.2 dramatiq/brokers/redis.py (maintenance re-queues the "
                                         "acks of workers whose heartbeat stopped: heartbeat_timeout)",
                                  bounds=REDIS_BOUNDS),
    ),
)

#: this library's runs in the published no-op benchmarks (taskbench parity)
SHAPES = (
    Shape("dramatiq", 20_000, 10, "serial", "last-finish", "dramatiq/; `dramatiq tasks -p 1 -t 10`", published_s=4.12,
          source="python_queue_benchmark"),
)
