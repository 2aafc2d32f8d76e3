"""NATS as a broker: its facts, and its durability as the backends configure it.

The machine's server is used unless ``--broker-url`` names another; a fault that stops, freezes or
restarts it runs on a private one (:class:`taskbench.harness.brokers.nats.PrivateNats`).
"""

from __future__ import annotations

from taskbench.brokers.base import Broker
from taskbench.brokers.durability import Durability

__all__ = ["Nats"]


class Nats(Broker):
    name = "nats"
    label = "NATS"
    default_port = 4222
    schemes = ("nats", "tls")
    local_url = "nats://127.0.0.1:4222"
    fault_needs_private = True
    greeting = (b"INFO ",)  # the server speaks first: its INFO line
    tls_schemes = ("tls",)
    # faststream on NATS: a JetStream stream with file storage (the server's default) and publishes that
    # wait for JetStream's ack
    stated_durability = Durability(True, "JetStream stream with file storage, acknowledged publishes")
    server = "taskbench.harness.brokers.nats:PrivateNats"
