"""FastStream passes the conformance suite on Redis, RabbitMQ and NATS JetStream."""

import pytest

from tests.backends.conformance import Conformance

pytestmark = pytest.mark.slow


class TestFaststream(Conformance):
    backend = "faststream"


class TestFaststreamRabbitMQ(Conformance):
    backend = "faststream"
    broker = "rabbitmq"


class TestFaststreamNats(Conformance):
    backend = "faststream"
    broker = "nats"
