"""Seed 003's Celery tasks, run by a real ``celery worker`` with the pool under test.

``celery -A taskbench.scenarios.celery_app worker -P gevent -c 100 -Q io`` ... Configured from
TASKBENCH_CELERY_* variables: the broker and result backend URL (Redis), the key prefix (kombu's
``global_keyprefix`` on both, so that nothing is shared with other runs), the delay server's URL.

- ``get_number``: an HTTP GET to the local delay server (the seed's ``requests.get``; here
  ``urllib``, which gevent and eventlet patch like any socket user), returning its random number;
- ``crunch_task``: CPU-bound work;
- ``process_task``: the CPU work in a ProcessPoolExecutor the task opens (seed 000, claim 14);
- ``sum_numbers``: the chord's callback.

Every task records its run in a Redis hash (task id -> runs), so the probe counts lost and
duplicated tasks, and the peak of tasks running at once. The worker's main process records when it
received each task from the broker (Celery's ``task_received`` signal: where its "Received task" log line
is written) and each task when it started and finished, so the probe sees a prefetch: tasks received
before any finished, of which only the pool's size started.
"""

from __future__ import annotations

import json
import os
import time
import urllib.request
from concurrent.futures import ProcessPoolExecutor
from typing import Any

import redis
from celery import Celery
from celery.signals import task_received, worker_ready

from taskbench.workloads import crunch

BROKER = os.environ.get("TASKBENCH_CELERY_URL", "redis://127.0.0.1:6379/0")
PREFIX = os.environ.get("TASKBENCH_CELERY_PREFIX", "taskbench:celery-pools:")
SERVER = os.environ.get("TASKBENCH_CELERY_SERVER", "http://127.0.0.1:8000/")

app = Celery("taskbench_pools", broker=BROKER, backend=BROKER)
app.conf.update(
    task_serializer="json",
    result_serializer="json",
    accept_content=["json"],
    event_serializer="json",
    broker_transport_options={"global_keyprefix": PREFIX},
    result_backend_transport_options={"global_keyprefix": PREFIX},
    result_expires=600,
    task_default_queue="io",
    broker_connection_retry_on_startup=True,
    worker_hijack_root_logger=False,
)

_ENTER = """
local n = redis.call('INCR', KEYS[1])
local m = tonumber(redis.call('GET', KEYS[2]) or '0')
if n > m then redis.call('SET', KEYS[2], n) end
redis.call('RPUSH', KEYS[3], ARGV[1])
return n
"""
_client: redis.Redis | None = None


def client() -> redis.Redis:
    global _client
    if _client is None:
        _client = redis.Redis.from_url(BROKER)
    return _client


class _Running:
    def __init__(self, task_id: str) -> None:
        self.task_id = task_id

    def __enter__(self) -> None:
        client().eval(_ENTER, 3, f"{PREFIX}running", f"{PREFIX}peak", f"{PREFIX}started", f"{time.time():.6f}")

    def __exit__(self, *exc: object) -> None:
        pipe = client().pipeline()
        pipe.rpush(f"{PREFIX}finished", f"{time.time():.6f}")
        pipe.decr(f"{PREFIX}running")
        pipe.hincrby(f"{PREFIX}runs", self.task_id, 1)
        pipe.execute()


@app.task  # type: ignore[untyped-decorator,unused-ignore]
def get_number(task_id: str) -> int:
    with _Running(task_id), urllib.request.urlopen(SERVER, timeout=60) as resp:  # noqa: S310 - loopback
        return int(json.loads(resp.read())["number"])


@app.task  # type: ignore[untyped-decorator,unused-ignore]
def crunch_task(task_id: str, iterations: int) -> int:
    with _Running(task_id):
        return crunch(iterations)


@app.task  # type: ignore[untyped-decorator,unused-ignore]
def process_task(task_id: str, iterations: int) -> int:
    """seed 000's cpu/process inside a Celery task: the task opens a ProcessPoolExecutor and runs the work in
    it. An error (the article's "daemonic processes are not allowed to have children") is recorded for the
    probe, then raised, as the task would raise it."""
    with _Running(task_id):
        try:
            with ProcessPoolExecutor(max_workers=1) as pool:
                return pool.submit(crunch, iterations).result()
        except Exception as exc:
            client().hset(f"{PREFIX}errors", task_id, f"{type(exc).__name__}: {exc}")
            raise


@app.task  # type: ignore[untyped-decorator,unused-ignore]
def sum_numbers(numbers: list[int]) -> int:
    with _Running("sum"):
        return sum(numbers)


@task_received.connect  # type: ignore[untyped-decorator,unused-ignore]
def _received(request: Any = None, **_: Any) -> None:
    client().rpush(f"{PREFIX}received", f"{time.time():.6f}")


@worker_ready.connect  # type: ignore[untyped-decorator,unused-ignore]
def _ready(sender: Any = None, **_: Any) -> None:
    client().hset(f"{PREFIX}ready", str(getattr(sender, "hostname", os.getpid())), os.getpid())
