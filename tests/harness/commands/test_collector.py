"""The cluster's commands on loopback: two ``taskbench drive`` pods and the ``taskbench collector`` Job, then
``taskbench collect`` of the collector's log (what a cluster run does, without the cluster)."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from pathlib import Path

import pytest
import redis
from click.testing import Result

from taskbench import backends
from taskbench.harness.keys import delete_run_keys
from taskbench.harness.processes.envs import ensure_env
from taskbench.harness.processes.stack import Stack
from taskbench.net import free_port, healthy
from taskbench.results import QueueCase, load
from tests.helpers import harness_cli


@pytest.fixture
def stack_env(redis_url: str, run_id: str) -> Iterator[dict[str, str]]:
    env = {**os.environ, "TASKBENCH_BACKEND": "arq", "TASKBENCH_RUN_ID": run_id, "TASKBENCH_REDIS_URL": redis_url,
           "TASKBENCH_BROKER_URL": redis_url}
    yield env
    conn = redis.Redis.from_url(redis_url)
    delete_run_keys(conn, run_id, backends.info("arq"))
    conn.close()


def test_drivers_and_the_collector_give_one_audited_result(stack_env: dict[str, str], tmp_path: Path,
                                                           cli: Callable[..., Result]) -> None:
    python = str(ensure_env("arq"))
    port = free_port()
    url = f"http://127.0.0.1:{port}/api/v1/incr/io/simple/arq"
    with Stack(stack_env, name="test-collector", stop_timeout=10) as stack, ExitStack() as pods:
        stack.start("worker-0", [python, "-m", "taskbench", "worker"], tmp_path / "worker.log")
        # the pods start in any order: the collector and the drivers before the API is even up
        collector = pods.enter_context(harness_cli(["collector", "--drivers", "2", "--workers", "1", "--wait", "300"],
                                                   env=stack_env))
        drivers = [pods.enter_context(harness_cli(
            ["drive", "--segment", f"{i}/2", "--url", url, "--users", "6", "--requests", "600", "--wait-workers", "1",
             "--node", f"pod-{i}"], env=stack_env)) for i in range(2)]
        stack.start("api", [python, "-m", "taskbench", "serve", "--port", str(port)], tmp_path / "api.log")
        stack.wait_ready(lambda: healthy(port), timeout=60, what="the API")
        outputs = [d.communicate(timeout=300)[0] for d in drivers]
        assert [d.returncode for d in drivers] == [0, 0], outputs
        log, _ = collector.communicate(timeout=300)
    assert collector.returncode == 0, log

    (tmp_path / "collector.log").write_text(log)
    done = cli("collect", str(tmp_path / "collector.log"), "--output", str(tmp_path / "results"))
    assert done.exit_code == 0, done.output
    (path,) = (tmp_path / "results").glob("*/result.json")
    result = load(path)
    (case,) = result.cases
    assert isinstance(case, QueueCase) and case.audit is not None and case.load is not None
    assert (case.audit.accepted, case.audit.lost, case.audit.duplicated) == (600, 0, 0)
    assert case.load.latency.count == 600
    assert result.config is not None and result.config["load"]["requests"] == 600
    assert [(s["node"], s["requests"]) for s in result.config["segments"]] == [("pod-0", 300), ("pod-1", 300)]
