"""The API's broker: /health checks it (503 naming it when it is gone), and ``durable`` follows its
configuration. The brokers here are private servers this test starts; the shared ones are never touched."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from taskbench import backends
from taskbench.harness.brokers.redis import EmbeddedRedis
from taskbench.harness.processes.envs import ensure_env
from taskbench.net import free_port
from taskbench.service.broker import BrokerDownError, BrokerProbe
from taskbench.settings import Settings
from tests.helpers import request, served


@pytest.fixture
def ledger(tmp_path: Path) -> Iterator[EmbeddedRedis]:
    server = EmbeddedRedis(tmp_path / "ledger" / "redis.log")
    server.start(dict(os.environ))
    yield server
    server.stop()


@pytest.mark.parametrize(("backend", "fsync", "durable", "words"), [
    ("arq", "always", True, "fsync always"), ("arq", "everysec", False, "~1 s"), ("arq", "none", False, "no AOF"),
    ("faststream", "always", True, "fsync always"),  # its producer's own check: FastStream's broker.ping
])
def test_durable_follows_the_broker_config_and_health_names_a_gone_broker(
        tmp_path: Path, ledger: EmbeddedRedis, run_id: str, backend: str, fsync: str, durable: bool,
        words: str) -> None:
    broker = EmbeddedRedis(tmp_path / "broker" / "redis.log", name="redis-broker", fsync=fsync)
    broker.start(dict(os.environ))
    env = {"TASKBENCH_BACKEND": backend, "TASKBENCH_REDIS_URL": ledger.url, "TASKBENCH_BROKER_URL": broker.url,
           "TASKBENCH_RUN_ID": run_id, "TASKBENCH_ENQUEUE_TIMEOUT": "1.0"}
    try:
        with served(tmp_path, env, python=str(ensure_env(backends.info(backend).extra, quiet=True))) as port:
            status, body = request(port, "GET", "/health")
            assert status == 200 and body["durable"] is durable and words in body["durability"], body
            assert body["broker"] == f"Redis at 127.0.0.1:{broker.port}"
            status, answer = request(port, "POST", f"/api/v1/incr/io/simple/{backend}", '{"task_id": "t-1"}')
            assert status == 202 and answer["durable"] is durable, answer
            broker.stop()
            status, body = request(port, "GET", "/health")
            assert status == 503 and f"broker: Redis at 127.0.0.1:{broker.port}" in body["detail"], body
            assert broker.secret not in body["detail"]
    finally:
        broker.stop()


@pytest.mark.parametrize(("kind", "name"), [("rabbitmq", "RabbitMQ"), ("nats", "NATS")])
def test_an_unreachable_rabbitmq_or_nats_is_named(kind: str, name: str) -> None:
    port = free_port()  # nothing listens there
    scheme = "amqp" if kind == "rabbitmq" else "nats"
    settings = Settings(backend="faststream", broker=kind, broker_url=f"{scheme}://127.0.0.1:{port}")
    probe = BrokerProbe(settings=settings, redis=None, producer=object())
    with pytest.raises(BrokerDownError, match=f"{name} at 127.0.0.1:{port} failed"):
        asyncio.run(probe.check(1.0))
    assert asyncio.run(probe.durability()).durable
