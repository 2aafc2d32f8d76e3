"""Taskiq: an async receiver on a Redis stream consumer group or a RabbitMQ quorum queue."""

from taskbench.backends.declaration import AMQP_REQUEUE, BackendInfo, Delivery
from taskbench.backends.shapes import Shape, folded

BACKENDS = (
    BackendInfo(
        name="taskiq",
        port=8007,
        rank=60,
        summary="Taskiq: async receiver on a Redis stream consumer group, acks when executed, idle reclaim",
        brokers=("redis", "rabbitmq"),
        key_patterns=("autoclaim:taskbench:{run_id}:*",),
        delivery={
            "redis": Delivery(recovery="late ack on a stream consumer group: an idle pending message is "
                                       "reclaimed after --task-timeout",
                              source="taskiq-redis 1.2 taskiq_redis/redis_broker.py RedisStreamBroker.listen "
                                     "(xautoclaim, idle_timeout)"),
            "rabbitmq": Delivery(recovery="quorum queue, ack after the task: requeued when the dead "
                                          "worker's connection closes",
                                 source=AMQP_REQUEUE),
        },
    ),
)

#: this library's runs in the published no-op benchmarks (taskbench parity)
SHAPES = (
    Shape("taskiq", 20_000, 32, "gather", "last-finish",
          "benchmarks/bench_taskiq.py; `taskiq worker --max-async-tasks 32 --max-prefetch 32`", parallel=32,
          options={"xread_count": "32", "max_prefetch": "32", "result_ex_time": "1"}, published_s=6.36,
          note="taskiq has no burst mode: timed to the last task's finish", source="streaq"),
    Shape("taskiq", 20_000, 10, "serial", "last-finish", "taskiq/; `taskiq worker --workers 10`", published_s=2.03,
          note=folded(10), source="python_queue_benchmark"),
)
