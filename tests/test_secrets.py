"""No password a user gives taskbench reaches a file a run writes: result, pages, index, logs, metrics."""

from __future__ import annotations

import json
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


# -- every URL, wherever taskbench prints or stores it ----------------------------------------------------

#: (a URL a user may give, the secrets in it): a target, brokers, ledgers, signed and token-carrying URLs
URLS = [
    ("http://u:PW1@127.0.0.1:8000/orders?api_key=KEY1", ["PW1", "KEY1"]),
    ("http://127.0.0.1:8000/orders?Authorization=Bearer%20TOK2&x=1", ["TOK2"]),
    ("http://127.0.0.1:8000/o?X-Amz-Signature=SIG3&X-Amz-Credential=AKIA3&X-Amz-Security-Token=STS3", ["SIG3", "AKIA3",
                                                                                                         "STS3"]),
    ("http://h:1/cb?state=ok#access_token=FRAG4", ["FRAG4"]),
    ("http://h:1/o?p%61ssword=ENC5&ApiKey=CASE5&client_secret=CS5&sessionid=SID5&jwt=JWT5", ["ENC5", "CASE5", "CS5",
                                                                                            "SID5", "JWT5"]),
    ("amqp://guest:BROKERPW6@127.0.0.1:5672/vhost", ["BROKERPW6"]),
    ("nats://NATSTOKEN7@127.0.0.1:4222", ["NATSTOKEN7"]),
    ("rediss://127.0.0.1:6380/0?password=LEDGERPW8&ssl_cert_reqs=none", ["LEDGERPW8"]),
    ("redis://127.0.0.1:6379/0?token=LEDGERTOK9", ["LEDGERTOK9"]),
    ("postgresql://app:PGPW10@db:5432/q?sslpassword=SSL10&sslkey=/k", ["PGPW10", "SSL10"]),
    ("redis://default:p@ss/w?rd11@127.0.0.1:1/0", ["p@ss/w?rd11", "ss/w?rd11"]),
    ("http://u:PW12@127.0.0.1:8000/orders?sig=SIG12;hmac=HM12", ["PW12", "SIG12", "HM12"]),
]


@pytest.mark.parametrize(("url", "secrets"), URLS, ids=[u for u, _ in URLS])
def test_no_secret_of_a_url_survives_any_way_it_is_shown(url: str, secrets: list[str]) -> None:
    shown = [redact(url), redact_text(f"load: {url}, closed model, 4 users"), redact_text(f"(see '{url}').")]
    shown += redact_argv(["taskbench", "run", "--target", url, f"--broker-url={url}",
                          f"--worker-cmd=cd x && REDIS_URL={url} exec arq w.S"])
    for secret in secrets:
        assert not [text for text in shown if secret in text], (secret, shown)
    assert redact_text("load: http://127.0.0.1:1/o?token=T, closed") == "load: http://127.0.0.1:1/o?token=***, closed"
    assert redact("http://127.0.0.1:8000/orders?id=7&page=2") == "http://127.0.0.1:8000/orders?id=7&page=2"


@pytest.mark.parametrize(("url", "secrets"), URLS, ids=[u for u, _ in URLS])
def test_no_secret_reaches_a_result_its_page_or_its_index(url: str, secrets: list[str], tmp_path: Path) -> None:
    """Every string of a result passes the redaction: a label and a workload as a target run makes them,
    a config value, a broker named in a fault's proof after the case was built, a failure appended."""
    from taskbench.report.html import render
    from taskbench.report.index import write_index
    from taskbench.results import FaultRecord
    from tests.report.synthetic import queue_run

    result = queue_run(run_id="r")
    case = result.cases[0]
    case.label = f"target {url}"
    assert isinstance(case, type(result.cases[0])) and hasattr(case, "workload")
    case.workload = f"target {url}"  # type: ignore[union-attr]
    case.fault = FaultRecord(fault="stall-broker@1+1", target="broker", proof=[f"paused redis at {url}"])
    result.config = {"target": url, "worker_cmd": f"cd x && REDIS_URL={url} exec arq w.S", "nested": [{"u": url}]}
    case.failures.append(f"cannot reach {url}")
    (tmp_path / "r").mkdir()
    (tmp_path / "r" / "result.json").write_text(result.to_json())
    (tmp_path / "r" / "report.html").write_text(render(result.redacted()))
    write_index(tmp_path)
    texts = {p.name: p.read_text() for p in tmp_path.rglob("*") if p.is_file()}
    assert set(texts) == {"result.json", "report.html", "index.html"}
    for secret in secrets:
        assert not [name for name, text in texts.items() if secret in text], secret
        assert secret not in case.label and secret not in case.workload  # type: ignore[union-attr]


def test_a_file_with_secrets_in_clear_renders_without_them(tmp_path: Path) -> None:
    """A result written by an older taskbench (its label holds the target as typed) is masked when read,
    so ``report`` and ``report --index`` never show the password."""
    import json

    from taskbench.results import load
    from tests.report.synthetic import queue_run

    data = json.loads(queue_run(run_id="r").model_dump_json())
    data["cases"][0]["label"] = "target http://u:OLDPW@127.0.0.1:1/orders?api_key=OLDKEY"
    data["cases"][0]["workload"] = data["cases"][0]["label"]
    path = tmp_path / "r" / "result.json"
    path.parent.mkdir()
    path.write_text(json.dumps(data))
    case = load(path).cases[0]
    assert case.label == "target http://u:***@127.0.0.1:1/orders?api_key=***"
    from taskbench.report.index import write_index

    index, _ = write_index(tmp_path)
    assert "OLDPW" not in index.read_text() and "OLDKEY" not in index.read_text()


def test_a_target_names_itself_redacted_in_its_config_lines_and_errors() -> None:
    from taskbench.driver import LoadSpec
    from taskbench.harness import HarnessError
    from taskbench.harness.commands.target import TargetConfig, reachable
    from taskbench.net import free_port

    port = free_port()
    url = f"http://u:TPW@127.0.0.1:{port}/orders?api_key=TKEY&token=TTOK"
    cfg = TargetConfig(url=url, load=LoadSpec(users=1, requests=1), ledger_url="redis://127.0.0.1:1/0?password=LPW",
                       broker_url="amqp://g:BPW@127.0.0.1:5672/", worker_cmd="REDIS_URL=redis://:WPW@h:1/0 arq w.S")
    texts = [json.dumps(cfg.to_dict()), cfg.shown]
    with pytest.raises(HarnessError) as down:
        reachable(url)
    texts.append(str(down.value))
    with pytest.raises(ValueError, match="give http:") as bad:
        TargetConfig(url="https://u:TPW@127.0.0.1/?api_key=TKEY", load=LoadSpec(users=1, requests=1))
    texts.append(str(bad.value))
    for secret in ("TPW", "TKEY", "TTOK", "LPW", "BPW"):
        assert not [t for t in texts if secret in t], (secret, texts)
    from taskbench import brokers

    assert "BPW" not in brokers.info("rabbitmq").where("amqp://g:BPW@127.0.0.1:5672/")


# -- a real run against a service the user runs ---------------------------------------------------------

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "service"
PROBE = Path(__file__).resolve().parents[1] / "probe" / "src"


@pytest.mark.slow
def test_a_target_run_writes_and_prints_none_of_its_urls_secrets(broker_redis_url: str, tmp_path: Path) -> None:
    """``run --target 'http://u:PW@127.0.0.1:PORT/orders?api_key=KEY&token=TOK'`` against the example
    service, with the ledger's password in a query string and the broker's as user:password: no secret
    is in any file of the run's folder, in its stdout or its stderr."""
    from urllib.parse import urlsplit

    from taskbench.harness.processes.envs import ensure_env
    from taskbench.harness.processes.stack import Stack
    from taskbench.net import free_port, listening

    bin_dir = ensure_env("arq").parent
    redis_pw = urlsplit(broker_redis_url).password
    assert redis_pw
    parts = urlsplit(broker_redis_url)
    ledger_url = f"redis://{parts.hostname}:{parts.port}/0?password={redis_pw}"
    port = free_port()
    env = {"REDIS_URL": broker_redis_url, "TASKBENCH_LEDGER_URL": broker_redis_url, "PYTHONPATH": str(PROBE),
           "ARQ_QUEUE": f"arq:queue:{port}"}
    assigned = " ".join(f"{k}={v}" for k, v in env.items())
    target = f"http://u:TARGETPW@127.0.0.1:{port}/orders?api_key=TARGETKEY&token=TARGETTOK"
    out = tmp_path / "results"
    with Stack({**os.environ, **env}, name=f"secrets-api-{port}", stop_timeout=5) as stack:
        stack.start("api", ["/bin/sh", "-c", f"cd {EXAMPLE} && {assigned} exec {bin_dir}/uvicorn app:app "
                                             f"--host 127.0.0.1 --port {port} --log-level warning"], tmp_path / "api.log")
        stack.wait_ready(lambda: listening(port), timeout=60, what="the example API")
        run = subprocess.run([sys.executable, "-m", "taskbench", "run", "--target", target,
                              "--payload", str(EXAMPLE / "payload.json"), "--redis-url", ledger_url,
                              f"--broker-url={broker_redis_url}", "--backend", "arq",
                              "--worker-cmd", f"cd {EXAMPLE} && {assigned} exec {bin_dir}/arq worker.WorkerSettings",
                              "--requests", "200", "--users", "4", "--output", str(out)],
                             capture_output=True, text=True, timeout=280, check=False)
    assert run.returncode == 0, run.stdout + run.stderr
    written = [path for path in out.rglob("*") if path.is_file()]
    assert {"result.json", "report.html", "index.html", "worker-0.log"} <= {p.name for p in written}
    secrets = ["TARGETPW", "TARGETKEY", "TARGETTOK", redis_pw]
    leaks = [(path, s) for path in written for s in secrets if s.encode() in path.read_bytes()]
    assert leaks == [], leaks
    assert [s for s in secrets if s in run.stdout + run.stderr] == [], run.stdout + run.stderr
    # what is shown instead: the target with its password and keys masked, in the table and the live lines
    shown = f"http://u:***@127.0.0.1:{port}/orders?api_key=***&token=***"
    assert shown in run.stdout and f"load: {shown}, closed model" in run.stderr.replace("\n", " "), run.stderr
    result = Result.model_validate_json(next(out.rglob("result.json")).read_text())
    case = result.cases[0]
    assert case.label == f"target {shown}" and case.summary.lost == 0
