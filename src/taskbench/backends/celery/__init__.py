"""Celery: late acks, a threads pool beside one event loop per worker process (or prefork), JSON."""

from __future__ import annotations

from typing import Final, Literal

from pydantic import Field

from taskbench.backends.bounds import KILL_WORKER, LOST, PER_KILL, PER_WORKER, RESTART_BROKER, Bound
from taskbench.backends.declaration import AMQP_REQUEUE, BackendInfo, Delivery
from taskbench.backends.options import LibraryOptions
from taskbench.backends.shapes import Shape


class Options(LibraryOptions):
    pool: Literal["threads", "prefork"] = Field(
        default="threads",
        description="Celery's execution pool (-P): threads runs a task on the worker process's event loop, "
                    "prefork in forked children with a synchronous Redis client (Celery's own default; the "
                    "article-000 versions need it)")


#: the windows kombu's source opens on Redis (read at the version locked in uv.lock)
REDIS_BOUNDS: Final = (
    Bound(figure=LOST, faults=KILL_WORKER, tasks=1, per=(PER_KILL,),
          text="the task fetched at the kill instant: kombu's BRPOP has taken it off the queue and its "
               "QoS.append (ZADD + HSET into the unacked set) has not run yet, so no visibility timeout "
               "brings it back; no setting closes this window (kombu has no BLMOVE mode)",
          source="kombu 5.7 kombu/transport/redis.py Channel._brpop_read -> QoS.append; celery/celery#7950; "
                 "docs/faults.md"),
    Bound(figure=LOST, faults=RESTART_BROKER, tasks=1, per=(PER_WORKER,),
          text="the task whose BRPOP reply was lost with the broker's connection: popped (and in the AOF), "
               "never delivered, never in the unacked set; one BRPOP is in flight per worker",
          source="kombu 5.7 kombu/transport/redis.py Channel._brpop_start/_brpop_read; celery/celery#4671; "
                 "docs/faults.md"),
)

BACKENDS = (
    BackendInfo(
        name="celery",
        port=8005,
        rank=50,
        summary="Celery: late acks, threads pool beside one event loop per worker process, JSON",
        dashboard="Flower",
        brokers=("redis", "rabbitmq"),
        threading="threads",
        options=Options,
        delivery={
            "redis": Delivery(recovery="late ack: kombu restores the unacked message after the visibility "
                                       "timeout (--task-timeout); a message a worker had just fetched "
                                       "when it was killed can be lost (docs/faults.md)",
                              source="kombu 5.7 kombu/transport/redis.py QoS.restore_visible "
                                     "(visibility_timeout)",
                              bounds=REDIS_BOUNDS),
            "rabbitmq": Delivery(recovery="late ack: requeued when the dead worker's connection closes",
                                 source=AMQP_REQUEUE),
        },
    ),
)

#: this library's runs in the published no-op benchmarks (taskbench parity)
SHAPES = (
    Shape("celery", 20_000, 10, "serial", "last-finish", "celery/; `celery worker -c 10 -P threads`",
          options={"result_backend": "1"}, published_s=11.68, source="python_queue_benchmark"),
)
