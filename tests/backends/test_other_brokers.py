"""The backends on the machine's RabbitMQ and NATS: every task runs once and every process stops cleanly.

Each run's queues and streams are named after its run id and deleted afterwards (`purge`): nothing of
anyone else's on those servers is touched. A test skips when the server is not there.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from taskbench.net import listening
from tests.helpers import harness_cli


@pytest.mark.slow
@pytest.mark.parametrize(("broker", "port", "backends"), [("rabbitmq", 5672, "celery,taskiq,faststream"),
                                                          ("nats", 4222, "faststream")])
def test_every_task_runs_once_and_every_worker_stops_with_code_0(out_dir: Path, broker: str, port: int,
                                                                 backends: str) -> None:
    if not listening(port):
        pytest.skip(f"no {broker} server on 127.0.0.1:{port}")
    # Celery's worker on RabbitMQ once needed SIGKILL at every stop (its stop raced the consumer for
    # the AMQP socket): the exit codes are the point of this test
    with harness_cli(["run", "--backends", backends, "--broker", broker, "--output", str(out_dir), "--model", "open",
                      "--rate", "200", "--users", "20", "--requests", "200", "--warmup", "10"]) as proc:
        out, _ = proc.communicate(timeout=400)
    result = json.loads(next(out_dir.glob("*/result.json")).read_text())
    for case in result["cases"]:
        assert case["summary"]["lost"] == 0 and case["summary"]["duplicated"] == 0, (case["backend"], case["summary"])
        assert case["exit_codes"] and all(code in (0, -15) for code in case["exit_codes"].values()), \
            (case["backend"], case["exit_codes"])
        assert all(code == 0 for name, code in case["exit_codes"].items() if name.startswith("worker")), \
            (case["backend"], case["exit_codes"])
        assert case["cleanup"]["purge"] == "ok", case["cleanup"]
    assert proc.returncode == 0, out
