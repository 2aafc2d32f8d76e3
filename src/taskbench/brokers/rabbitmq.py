"""RabbitMQ as a broker: its facts, and its durability as the backends configure it.

The machine's server is used unless ``--broker-url`` names another; a fault that stops, freezes or
restarts it runs on a private one (:class:`taskbench.harness.brokers.rabbitmq.PrivateRabbit`).
"""

from __future__ import annotations

from taskbench.brokers.base import Broker
from taskbench.brokers.durability import Durability

__all__ = ["RabbitMQ"]


class RabbitMQ(Broker):
    name = "rabbitmq"
    label = "RabbitMQ"
    default_port = 5672
    schemes = ("amqp", "amqps")
    local_url = "amqp://guest:guest@127.0.0.1:5672/"
    fault_needs_private = True
    # AMQP 0-9-1: the client's protocol header; the server answers Connection.Start (a method frame on
    # channel 0), or its own header when it speaks another version
    hello = b"AMQP\x00\x00\x09\x01"
    greeting = (b"\x01\x00\x00", b"AMQP")
    tls_schemes = ("amqps",)
    # as the backends configure it (see each backend module): celery a durable classic queue, persistent
    # messages and confirm_publish; taskiq and faststream quorum queues, persistent messages on a
    # publisher-confirm channel
    stated_durability = Durability(True, "durable queue, persistent messages, publisher confirms")
    server = "taskbench.harness.brokers.rabbitmq:PrivateRabbit"
