"""FastStream: competing consumers on a Redis stream, a RabbitMQ quorum queue or NATS JetStream
(``faststream``), and the seed's unsafe Redis pub/sub wiring (``faststream-pubsub``)."""

from __future__ import annotations

from typing import Final

from taskbench.backends.bounds import NO_RECOVERY, RESTART_BROKER, Bound
from taskbench.backends.declaration import AMQP_REQUEUE, AT_MOST_ONCE, BackendInfo, Delivery

#: the window FastStream's source opens on Redis (read at the version locked in uv.lock)
REDIS_BOUNDS: Final = (
    Bound(figure=NO_RECOVERY, faults=RESTART_BROKER, data_lost=True,
          text="the restart took the stream and its consumer group; the subscriber creates the group once, "
               "at its start, so its XREADGROUP never reads again",
          source="faststream 0.7 faststream/redis/subscriber/usecases/stream_subscriber.py start "
                 "(xgroup_create); docs/faults.md"),
)

BACKENDS = (
    BackendInfo(
        name="faststream",
        port=8006,
        rank=30,
        summary="FastStream: competing consumers (Redis stream group, RabbitMQ quorum queue, NATS JetStream)",
        brokers=("redis", "rabbitmq", "nats"),
        delivery={
            "redis": Delivery(recovery="stream consumer group with manual ack: a pending message is claimed "
                                       "by another consumer after --task-timeout",
                              source="faststream 0.7 faststream/redis/subscriber/usecases/stream_subscriber.py "
                                     "(XAUTOCLAIM, min_idle_time); taskbench/backends/faststream/backend.py",
                              bounds=REDIS_BOUNDS),
            "rabbitmq": Delivery(recovery="quorum queue, ack after the handler: requeued when the dead "
                                          "worker's connection closes",
                                 source=AMQP_REQUEUE),
            "nats": Delivery(recovery="JetStream ack_wait: redelivered after --task-timeout",
                             source="NATS docs, JetStream consumers: AckWait (an unacknowledged message is "
                                    "redelivered)"),
        },
    ),
    BackendInfo(
        name="faststream-pubsub",
        rank=40,
        summary="UNSAFE seed wiring (article 000): FastStream on Redis pub/sub; every worker runs every task, "
                "a task sent while no worker listens is lost",
        durable=False,  # PUBLISH keeps nothing: the 2xx says only that the API published
        unsafe="Redis pub/sub broadcasts: with N workers each task runs N times, and a message published "
               "while no worker is subscribed is dropped (no queue, no ack, no redelivery)",
        fans_out=True,
        variant="pubsub",
        default_delivery=Delivery(guarantee=AT_MOST_ONCE, recovery="none: pub/sub keeps nothing",
                                  source="Redis docs, Pub/Sub: at-most-once message delivery"),
    ),
)
