"""No password a user gives taskbench reaches a file a run writes: result, pages, index, logs, metrics."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from taskbench.harness.brokers.redis import EmbeddedRedis
from taskbench.redaction import redact, redact_argv, redact_text
from taskbench.results import Result


@pytest.fixture
def private_redis(tmp_path: Path) -> Iterator[EmbeddedRedis]:
    """A private redis-server with ``requirepass`` (a random password of its own) on a free port."""
    server = EmbeddedRedis(tmp_path / "user-redis" / "redis.log", name="user-redis")
    server.start(dict(os.environ))
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def broker_redis(tmp_path: Path) -> Iterator[EmbeddedRedis]:
    server = EmbeddedRedis(tmp_path / "user-broker" / "redis.log", name="user-broker")
    server.start(dict(os.environ))
    try:
        yield server
    finally:
        server.stop()


@pytest.mark.slow
def test_a_users_passwords_are_in_no_file_the_run_wrote(private_redis: EmbeddedRedis, broker_redis: EmbeddedRedis,
                                                         tmp_path: Path) -> None:
    """The ledger's URL with the password in its query string, the broker's with user:password in the
    ``--option=value`` form: the run passes, and neither password is in any file under --output."""
    out = tmp_path / "results"
    ledger_url = f"redis://127.0.0.1:{private_redis.port}/0?password={private_redis.secret}"
    broker_url = f"redis://default:{broker_redis.secret}@127.0.0.1:{broker_redis.port}/0"
    run = subprocess.run([sys.executable, "-m", "taskbench", "run", "--backends", "background,arq",
                          "--requests", "100", "--warmup", "10", "--redis-url", ledger_url,
                          f"--broker-url={broker_url}", "--output", str(out)],
                         capture_output=True, text=True, timeout=300, check=False)
    assert run.returncode == 0, run.stdout + run.stderr
    secrets = [private_redis.secret.encode(), broker_redis.secret.encode()]
    written = [path for path in out.rglob("*") if path.is_file()]
    names = {path.name for path in written}
    assert {"result.json", "report.html", "index.html", "api.log", "worker-0.log"} <= names, names
    leaks = [(path, secret) for path in written for secret in secrets if secret in path.read_bytes()]
    assert leaks == [], leaks
    for secret in secrets:
        assert secret.decode() not in run.stdout + run.stderr
    result = Result.model_validate_json(next(out.rglob("result.json")).read_text())
    assert "--redis-url" in result.command and f"--broker-url={redact(broker_url)}" in result.command


def test_every_url_form_is_masked() -> None:
    assert redact("redis://:pw@h:1/0") == "redis://:***@h:1/0"
    assert redact("redis://user:p@ss/w?rd@h:1/0") == "redis://user:***@h:1/0"  # unencoded @, / and ? in it
    assert redact("nats://TOKEN@127.0.0.1:4222") == "nats://***@127.0.0.1:4222"  # a lone user may be a token
    assert redact("unix:///run/r.sock?db=0&password=pw") == "unix:///run/r.sock?db=0&password=***"
    assert redact("postgresql://u@h/db?sslpassword=pw&application_name=x") == \
        "postgresql://***@h/db?sslpassword=***&application_name=x"
    assert redact("redis://127.0.0.1:6379/0") == "redis://127.0.0.1:6379/0"
    assert redact_argv(["taskbench", "run", "--redis-url", "redis://:pw@h/0", "--broker-url=amqp://g:pw@h/",
                        "up", "--auth", "admin:pw", "--auth=admin:pw", "--requests", "10"]) == \
        ["taskbench", "run", "--redis-url", "redis://:***@h/0", "--broker-url=amqp://g:***@h/",
         "up", "--auth", "admin:***", "--auth=admin:***", "--requests", "10"]
    assert redact_text("cannot reach redis://:pw@h:1/0 (refused)") == "cannot reach redis://:***@h:1/0 (refused)"


def test_a_result_written_before_the_rule_is_masked_when_read() -> None:
    """A file of an older taskbench (its command as typed) renders without the password: the model
    masks command, config, redis info, parameters, failures and every recorded argv on validation."""
    from tests.report.synthetic import queue_run

    data = queue_run().model_dump()
    data.update(command=["taskbench", "run", "--redis-url", "redis://:hunter2@h/0"],
                config={**(data["config"] or {}), "redis_url": "redis://:hunter2@h/0"},
                redis={"mode": "external", "url": "redis://:hunter2@h/0"})
    data["cases"][0]["failures"] = ["cannot reach redis://:hunter2@h/0"]
    result = Result.model_validate(data)
    result.cases[0].failures.append("again redis://:hunter2@h/0")  # appended after validation
    assert "hunter2" not in result.to_json()
    from taskbench.report.html import render

    assert "hunter2" not in render(result.redacted())
