"""Celery passes the conformance suite, on Redis and on RabbitMQ."""

import pytest

from tests.backends.conformance import Conformance

pytestmark = pytest.mark.slow


class TestCelery(Conformance):
    backend = "celery"


class TestCeleryRabbitMQ(Conformance):
    backend = "celery"
    broker = "rabbitmq"
