"""The reference API over real HTTP: routes, validation, bad input, and BackgroundTasks execution.

One server serves the whole module (starting uvicorn per test cost more than the tests); each test
still starts from an empty ledger: ``client`` deletes the run's keys after every test, and every
test waits for the tasks it caused before it ends.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import redis
from click.testing import Result

from taskbench.ledger import Ledger
from taskbench.wait import wait_until
from tests.helpers import assert_one_line_error, request, served

URL = "/api/v1/incr/io/simple/background"


@pytest.fixture(scope="module")
def module_run_id() -> str:
    return f"test-{uuid.uuid4().hex[:12]}"


@pytest.fixture
def run_id(module_run_id: str) -> str:
    """The module's server writes under one run id; ``client`` empties it after each test."""
    return module_run_id


@pytest.fixture(scope="module")
def module_api(tmp_path_factory: pytest.TempPathFactory, redis_url: str, module_run_id: str) -> Iterator[int]:
    env = {"TASKBENCH_BACKEND": "background", "TASKBENCH_REDIS_URL": redis_url,
           "TASKBENCH_RUN_ID": module_run_id, "TASKBENCH_MAX_BODY_BYTES": "4096"}
    with served(tmp_path_factory.mktemp("api"), env) as port:
        yield port


@pytest.fixture
def api(module_api: int, client: redis.Redis, run_id: str) -> int:
    assert Ledger(f"taskbench:{run_id}:").executed_count(client) == 0, "the previous test left tasks behind"
    return module_api


def _wait_executed(client: redis.Redis, prefix: str, n: int) -> dict[str, int]:
    ledger = Ledger(prefix)
    wait_until(lambda: ledger.executed_count(client) >= n, 10, what=f"{n} executed task(s)")
    return ledger.read(client)[0]


def test_health(api: int, run_id: str) -> None:
    status, body = request(api, "GET", "/health")
    assert status == 200
    assert body == {"status": "ok", "backend": "background", "run_id": run_id}


@pytest.mark.parametrize("workload", ["io/simple", "io/sync", "io/thread", "cpu/simple", "cpu/process"])
def test_accepts_and_executes_every_workload(api: int, client: redis.Redis, run_id: str, workload: str) -> None:
    body = json.dumps({"value": 3, "task_id": "abc-1", "enqueued_at": time.time()})
    status, answer = request(api, "POST", f"/api/v1/incr/{workload}/background", body)
    assert status == 202, answer
    assert answer == {"status": "accepted", "task_id": "abc-1", "backend": "background",
                      "mode": "awaited", "durable": False}
    assert _wait_executed(client, f"taskbench:{run_id}:", 1) == {"abc-1": 1}
    assert int(client.get(f"taskbench:{run_id}:counter") or 0) == 3


def test_empty_body_gets_defaults(api: int, client: redis.Redis, run_id: str) -> None:
    first = request(api, "POST", URL, None)
    second = request(api, "POST", URL, "{}")
    assert first[0] == second[0] == 202
    assert first[1]["task_id"] != second[1]["task_id"]
    assert len(_wait_executed(client, f"taskbench:{run_id}:", 2)) == 2


@pytest.mark.parametrize(
    ("path", "body", "status", "message"),
    [
        (URL, "{not json", 422, "JSON decode error"),
        (URL, '{"value": 0}', 422, "greater than or equal to 1"),
        (URL, '{"value": 10000000}', 422, "less than or equal to 1000000"),
        (URL, '{"value": "many"}', 422, "valid integer"),
        (URL, '{"task_id": "has space"}', 422, "pattern"),
        (URL, '{"enqueued_at": -1}', 422, "greater than or equal to 0"),
        (URL, '{"surprise": 1}', 422, "Extra inputs"),
        ("/api/v1/incr/io/process/background", "{}", 404, "unknown workload 'io/process'"),
        ("/api/v1/incr/gpu/simple/background", "{}", 404, "unknown workload 'gpu/simple'"),
        ("/api/v1/incr/io/simple/nosuch", "{}", 404, "unknown backend 'nosuch'"),
        ("/api/v1/incr/io/simple/arq", "{}", 404, "serves backend 'background', not 'arq'"),
    ],
)
def test_bad_input_gets_4xx_with_message(
    api: int, client: redis.Redis, run_id: str, path: str, body: str, status: int, message: str
) -> None:
    got, answer = request(api, "POST", path, body)
    assert got == status
    assert message in json.dumps(answer)
    # nothing ran: a good request sent after it is the only task that executes
    assert request(api, "POST", URL, '{"task_id": "after-bad"}')[0] == 202
    assert _wait_executed(client, f"taskbench:{run_id}:", 1) == {"after-bad": 1}


def test_oversized_body_is_refused(api: int, client: redis.Redis, run_id: str) -> None:
    big = json.dumps({"value": 1, "task_id": "x" * 10, "pad": "y" * 10_000})
    status, answer = request(api, "POST", URL, big)
    assert status == 413
    assert "larger than 4096 bytes" in answer["detail"]
    # the server still works afterwards, and the refused body ran nothing
    assert request(api, "POST", URL, '{"task_id": "after-big"}')[0] == 202
    assert _wait_executed(client, f"taskbench:{run_id}:", 1) == {"after-big": 1}


def test_after_response_mode(tmp_path: Path, redis_url: str, run_id: str, client: redis.Redis) -> None:
    env = {"TASKBENCH_BACKEND": "background", "TASKBENCH_REDIS_URL": redis_url,
           "TASKBENCH_RUN_ID": run_id, "TASKBENCH_ENQUEUE_MODE": "after-response"}
    with served(tmp_path, env) as port:
        status, answer = request(port, "POST", URL, '{"task_id": "late-1"}')
        assert status == 202
        assert answer["mode"] == "after-response"
        assert answer["durable"] is False
        assert _wait_executed(client, f"taskbench:{run_id}:", 1) == {"late-1": 1}


def test_serve_with_unreachable_redis_is_one_line(tmp_path: Path) -> None:
    out = subprocess.run(
        [sys.executable, "-m", "taskbench", "serve", "--redis-url", "redis://127.0.0.1:1/0"],
        capture_output=True, text=True, timeout=60, check=False,
    )
    assert out.returncode == 2
    assert "cannot reach Redis at 127.0.0.1:1" in out.stderr
    assert "Traceback" not in out.stderr


def test_serve_with_unknown_backend(cli: Callable[..., Result]) -> None:
    assert_one_line_error(cli("serve", "--backend", "nope"), "unknown backend 'nope'")
