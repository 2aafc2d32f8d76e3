"""Taskiq passes the conformance suite, on Redis and on RabbitMQ."""

import pytest

from tests.backends.conformance import Conformance

pytestmark = pytest.mark.slow


class TestTaskiq(Conformance):
    backend = "taskiq"


class TestTaskiqRabbitMQ(Conformance):
    backend = "taskiq"
    broker = "rabbitmq"
