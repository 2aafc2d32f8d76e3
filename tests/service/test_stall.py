"""A stalled broker: the API's enqueue has a deadline and says the outcome is unknown, and /health
says Redis does not answer. The Redis here is a private redis-server this test starts and freezes
(SIGSTOP, or CLIENT PAUSE); the shared one is never touched."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from taskbench import backends
from taskbench.harness.envs import ensure_env
from taskbench.harness.redis_server import EmbeddedRedis
from tests.helpers import request, served

URL = "/api/v1/incr/io/simple/arq"


@pytest.fixture
def private_redis(tmp_path: Path) -> Iterator[EmbeddedRedis]:
    server = EmbeddedRedis(tmp_path / "redis.log")
    server.start(dict(os.environ))
    try:
        yield server
    finally:
        os.kill(server.proc.pid, signal.SIGCONT)  # a frozen server cannot take its SIGTERM
        server.stop()


@pytest.fixture
def arq_api(tmp_path: Path, private_redis: EmbeddedRedis, run_id: str) -> Iterator[int]:
    python = str(ensure_env(backends.info("arq").extra, quiet=True))
    env = {"TASKBENCH_BACKEND": "arq", "TASKBENCH_REDIS_URL": private_redis.url, "TASKBENCH_RUN_ID": run_id,
           "TASKBENCH_ENQUEUE_TIMEOUT": "1.0"}
    with served(tmp_path, env, python=python) as port:
        yield port


def _timed(port: int, method: str, path: str, body: str | None = None) -> tuple[int, object, float]:
    start = time.monotonic()
    status, answer = request(port, method, path, body)
    return status, answer, time.monotonic() - start


@pytest.mark.parametrize("stall", ["sigstop", "client-pause"])
def test_a_stalled_broker_gets_503_outcome_unknown(arq_api: int, private_redis: EmbeddedRedis,
                                                   stall: str) -> None:
    assert request(arq_api, "POST", URL, '{"task_id": "before"}')[0] == 202
    status, answer, _ = _timed(arq_api, "GET", "/health")
    assert (status, answer["redis"]) == (200, "ok")  # type: ignore[index]
    admin = redis.Redis.from_url(private_redis.url)
    if stall == "sigstop":
        os.kill(private_redis.proc.pid, signal.SIGSTOP)
    else:
        admin.execute_command("CLIENT", "PAUSE", 4000, "ALL")
    try:
        status, answer, took = _timed(arq_api, "POST", URL, '{"task_id": "during"}')
        assert status == 503, answer
        assert "did not finish within 1 s: the outcome is unknown" in answer["detail"]  # type: ignore[index]
        assert took < 3.0
        status, answer, took = _timed(arq_api, "GET", "/health")
        assert status == 503
        assert "did not answer a PING within 1 s" in answer["detail"]  # type: ignore[index]
        assert took < 3.0
    finally:
        if stall == "sigstop":
            os.kill(private_redis.proc.pid, signal.SIGCONT)
        else:
            admin.execute_command("CLIENT", "UNPAUSE")
        admin.close()
    deadline = time.monotonic() + 10
    while request(arq_api, "GET", "/health")[0] != 200:
        assert time.monotonic() < deadline, "the API did not recover after the stall"
        time.sleep(0.1)
    assert request(arq_api, "POST", URL, '{"task_id": "after"}')[0] == 202
