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
from taskbench.harness.brokers.redis import EmbeddedRedis
from taskbench.harness.processes.envs import ensure_env
from taskbench.harness.processes.process_set import ProcessSet
from taskbench.ledger import Ledger, audit
from taskbench.wait import wait_until
from tests.helpers import request, served


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
def stalled_api(request: pytest.FixtureRequest, tmp_path: Path, private_redis: EmbeddedRedis,
                run_id: str) -> Iterator[tuple[str, int]]:
    backend = request.param
    python = str(ensure_env(backends.info(backend).extra, quiet=True))
    env = {"TASKBENCH_BACKEND": backend, "TASKBENCH_REDIS_URL": private_redis.url, "TASKBENCH_RUN_ID": run_id,
           "TASKBENCH_ENQUEUE_TIMEOUT": "1.0"}
    with served(tmp_path, env, python=python) as port:
        yield backend, port


@pytest.mark.parametrize(("stalled_api", "stall"), [("arq", "sigstop"), ("arq", "client-pause"),
                                                     ("celery", "sigstop")], indirect=["stalled_api"])
def test_a_stalled_broker_gets_503_outcome_unknown(stalled_api: tuple[str, int], private_redis: EmbeddedRedis,
                                                   stall: str) -> None:
    """The issue saw arq and Celery hold the request for as long as Redis was paused, then 202."""
    backend, api = stalled_api
    url = f"/api/v1/incr/io/simple/{backend}"
    assert request(api, "POST", url, '{"task_id": "before"}')[0] == 202
    status, answer = request(api, "GET", "/health")
    assert (status, answer["redis"]) == (200, "ok")
    admin = redis.Redis.from_url(private_redis.url)
    if stall == "sigstop":
        os.kill(private_redis.proc.pid, signal.SIGSTOP)
    else:
        admin.execute_command("CLIENT", "PAUSE", 4000, "ALL")
    try:
        # answered at the deadline, not held for as long as Redis is: a 503 that says so
        status, answer = request(api, "POST", url, '{"task_id": "during"}')
        assert status == 503, answer
        assert "did not finish within 1 s: the outcome is unknown" in answer["detail"]
        status, answer = request(api, "GET", "/health")
        assert status == 503
        assert "did not answer a PING within 1 s" in answer["detail"]
    finally:
        if stall == "sigstop":
            os.kill(private_redis.proc.pid, signal.SIGCONT)
        else:
            admin.execute_command("CLIENT", "UNPAUSE")
        admin.close()
    wait_until(lambda: request(api, "GET", "/health")[0] == 200, 30, what="the API to recover after the stall",
               interval=0.1)
    assert request(api, "POST", url, '{"task_id": "after"}')[0] == 202


def test_an_unknown_outcome_that_ran_is_counted_unexpected(tmp_path: Path, private_redis: EmbeddedRedis,
                                                           redis_url: str, run_id: str,
                                                           client: redis.Redis) -> None:
    """SAQ's enqueue is one script: sent to a frozen Redis, it runs when Redis wakes although the
    client got a 503 at the deadline. That is what the 503's "outcome is unknown" means, and the
    audit counts the id as unexpected (recovered), not as lost or as an error of the audit. A retry
    of the id is answered 409 "unknown", and the task runs once.

    The broker is the private Redis, frozen; the run's Redis (the ledger and the API's claims of
    task ids) is the test Redis, which keeps answering."""
    python = str(ensure_env(backends.info("saq").extra, quiet=True))
    env = {"TASKBENCH_BACKEND": "saq", "TASKBENCH_REDIS_URL": redis_url, "TASKBENCH_BROKER_URL": private_redis.url,
           "TASKBENCH_RUN_ID": run_id, "TASKBENCH_ENQUEUE_TIMEOUT": "1.0"}
    saq_url = "/api/v1/incr/io/simple/saq"
    ledger = Ledger(f"taskbench:{run_id}:")
    with ProcessSet({**os.environ, **env}) as procs:
        procs.start("worker", [python, "-m", "taskbench", "worker"], tmp_path / "worker.log")
        wait_until(lambda: client.hlen(f"taskbench:{run_id}:ready") >= 1, 60, what="the saq worker")
        with served(tmp_path, env, python=python) as port:
            assert request(port, "POST", saq_url, '{"task_id": "before"}')[0] == 202  # a warm connection
            os.kill(private_redis.proc.pid, signal.SIGSTOP)
            try:
                status, answer = request(port, "POST", saq_url, '{"task_id": "unknown"}')
            finally:
                time.sleep(0.5)
                os.kill(private_redis.proc.pid, signal.SIGCONT)
            assert status == 503 and "outcome is unknown" in answer["detail"], answer
            wait_until(lambda: ledger.executed_count(client) >= 2, 30, what="both tasks to run")
            status, answer = request(port, "POST", saq_url, '{"task_id": "unknown"}')
            assert (status, answer["first"]) == (409, "unknown"), answer
            assert request(port, "POST", saq_url, '{"task_id": "last"}')[0] == 202
            wait_until(lambda: ledger.executed_count(client) >= 3, 30, what="the last task to run")
    rows = ledger.rows(client)
    assert rows.counts == {"before": 1, "unknown": 1, "last": 1}
    report = audit(["before", "last"], rows.counts, rows.times, failed_ids=["unknown"], corrupt=rows.corrupt)
    categories = report.to_model().categories
    assert (categories.attempted, categories.ok, categories.lost, categories.unexpected,
            categories.recovered) == (3, 2, 0, 1, 1)
    assert categories.unexpected_ids == ["unknown"]


def test_a_failed_enqueue_releases_the_task_id(tmp_path: Path, private_redis: EmbeddedRedis, redis_url: str,
                                               run_id: str, client: redis.Redis) -> None:
    """A broker that refuses the connection is a definite failure (503 with its error, not "unknown"):
    the API releases its claim of the id, so the same id may be sent again once the broker is back.
    Dramatiq's broker is the private Redis, stopped and started again; the claims are on the test Redis."""
    python = str(ensure_env(backends.info("dramatiq").extra, quiet=True))
    env = {"TASKBENCH_BACKEND": "dramatiq", "TASKBENCH_REDIS_URL": redis_url,
           "TASKBENCH_BROKER_URL": private_redis.url, "TASKBENCH_RUN_ID": run_id}
    url = "/api/v1/incr/io/simple/dramatiq"
    claims = f"taskbench:{run_id}:ids"
    with served(tmp_path, env, python=python) as port:
        assert request(port, "POST", url, '{"task_id": "warm"}')[0] == 202
        private_redis.stop()
        status, answer = request(port, "POST", url, '{"task_id": "again"}')
        assert status == 503 and "enqueue failed" in answer["detail"], answer
        assert not client.hexists(claims, "again")
        private_redis.start(dict(os.environ))
        status, answer = wait_until(lambda: (r := request(port, "POST", url, '{"task_id": "again"}'))[0] != 503
                                    and r, 30, what="the broker back") or (0, None)
        assert status == 202, answer
        assert client.hexists(claims, "again")
        status, answer = request(port, "POST", url, '{"task_id": "again"}')
        assert (status, answer["first"]) in ((409, "accepted"), (409, "pending")), answer
