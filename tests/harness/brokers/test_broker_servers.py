"""Private RabbitMQ and NATS servers: what a fault on those brokers stops, freezes and restarts.

Real servers (``rabbitmq-server``, ``nats-server``) on free ports with their data in the test's folder;
the machine's shared brokers are never touched. A test skips where the server is not installed.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from taskbench.harness.brokers import PrivateServer, needs_private_broker, private_broker
from taskbench.harness.faults import broker_restart
from taskbench.harness.processes.envs import ensure_env
from taskbench.net import listening
from taskbench.results import FaultRecord
from taskbench.wait import WaitTimeoutError, wait_until
from tests.helpers import harness_cli


def _need(program: str) -> None:
    if shutil.which(program) is None and shutil.which(program, path="/usr/sbin:/usr/local/sbin") is None:
        pytest.skip(f"{program} is not installed")


def _group(pgid: int) -> list[int]:
    found = []
    for proc in psutil.process_iter():
        try:
            if os.getpgid(proc.pid) == pgid:
                found.append(proc.pid)
        except (psutil.Error, OSError):
            pass
    return found


@pytest.fixture(params=["nats", "rabbitmq"])
def server(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[PrivateServer]:
    _need({"nats": "nats-server", "rabbitmq": "rabbitmq-server"}[request.param])
    made = private_broker(request.param, tmp_path / request.param)
    made.start(dict(os.environ))
    try:
        yield made
    finally:
        made.stop()


# run in the faststream backend's environment, which has nats-py and aio-pika
_COUNT = """
import asyncio, os, sys
kind, url, publish = sys.argv[1], os.environ["TB_URL"], int(sys.argv[2])

async def nats_count():
    import nats
    client = await nats.connect(url, allow_reconnect=False)
    js = client.jetstream()
    if publish:
        await js.add_stream(name="tbtest", subjects=["tbtest.x"])
    for i in range(publish):
        await js.publish("tbtest.x", str(i).encode())
    info = await js.stream_info("tbtest")
    await client.close()
    return info.state.messages

async def rabbit_count():
    import aio_pika
    connection = await aio_pika.connect(url)
    channel = await connection.channel(publisher_confirms=True)
    args = {"x-queue-type": "quorum"}  # what faststream and taskiq declare
    if publish:  # afterwards only looked up: a queue the restart lost is an error, not a new empty queue
        await channel.declare_queue("tbtest", durable=True, arguments=args)
    for i in range(publish):
        await channel.default_exchange.publish(
            aio_pika.Message(str(i).encode(), delivery_mode=aio_pika.DeliveryMode.PERSISTENT), routing_key="tbtest")
    declared = await channel.declare_queue("tbtest", durable=True, passive=True, arguments=args)
    await connection.close()
    return declared.declaration_result.message_count

print(asyncio.run(nats_count() if kind == "nats" else rabbit_count()))
"""


def _publish_and_count(server: PrivateServer, publish: bool, url: str | None = None) -> int:
    """Messages in the test's durable queue / JetStream stream, after publishing 5 (when ``publish``)."""
    python = ensure_env("faststream")
    out = subprocess.run([str(python), "-c", _COUNT, server.kind, "5" if publish else "0"],
                         env={**os.environ, "TB_URL": url or server.url}, capture_output=True, text=True,
                         timeout=60, check=False)
    if out.returncode != 0:
        raise RuntimeError(out.stderr.strip().splitlines()[-1] if out.stderr.strip() else "no output")
    return int(out.stdout.strip())


def test_the_secret_is_in_a_private_file_and_strangers_are_refused(server: PrivateServer) -> None:
    args = subprocess.run(["ps", "-o", "args=", "-g", str(server.proc.pid)], capture_output=True, text=True,
                          check=False).stdout
    assert args.strip() and server.secret not in args
    conf = next(p for p in server.folder.glob("*.conf") if "env" not in p.name)
    assert conf.stat().st_mode & 0o777 == 0o600 and server.secret in conf.read_text()
    stranger = server.url.replace(server.secret, "wrong")
    assert server.address in server.url and stranger != server.url
    with pytest.raises(RuntimeError, match=r"(?i)auth|ACCESS_REFUSED|PLAIN"):
        _publish_and_count(server, publish=False, url=stranger)


@pytest.mark.parametrize("kind", ["restart-broker", "restart-broker-term"])
def test_restart_stops_the_whole_group_and_keeps_the_durable_messages(server: PrivateServer, kind: str) -> None:
    assert _publish_and_count(server, publish=True) == 5
    # a queue declared a moment before a crash may not be on disk yet (seen: gone after a SIGKILL 0.3 s
    # later, kept after 1 s); the runs declare theirs seconds before any fault
    time.sleep(2)
    old = server.proc.pid
    record = FaultRecord(fault=f"{kind}@1", target="broker")
    broker_restart.restart(kind, server, record)
    info = record.broker_restart
    assert info is not None and info.broker == server.kind and info.new_pid == server.proc.pid != old
    assert not _group(old), "every process of the old server's group is gone"
    assert any("refused" in line for line in info.proof), info.proof
    assert info.exit_code == (-signal.SIGKILL if kind == "restart-broker" else info.exit_code)
    # persistent messages survived the restart (a quorum queue answers 0 until it has read its log back)
    counts: list[int] = []

    def back() -> bool:
        counts.append(_publish_and_count(server, publish=False))
        return counts[-1] == 5

    with contextlib.suppress(WaitTimeoutError):
        wait_until(back, 30, interval=0.5, what="the messages back")
    assert counts[-1] == 5, counts
    new = server.proc.pid
    server.stop()
    assert not _group(new) and not listening(server.port)


def test_a_private_server_is_for_broker_faults_on_rabbitmq_and_nats_without_a_url() -> None:
    assert needs_private_broker("nats", None, "broker")
    assert needs_private_broker("rabbitmq", None, "broker")
    assert not needs_private_broker("rabbitmq", "amqp://guest:guest@127.0.0.1:5672/", "broker")
    assert not needs_private_broker("redis", None, "broker")  # the embedded broker Redis is already private
    assert not needs_private_broker("nats", None, "worker-0")
    assert not needs_private_broker("nats", None, None)


@pytest.mark.slow
def test_a_run_through_a_nats_restart_loses_nothing(out_dir: Path) -> None:
    _need("nats-server")
    with harness_cli(["run", "--backends", "faststream", "--broker", "nats", "--output", str(out_dir),
                      "--model", "open", "--rate", "150", "--users", "20", "--duration", "5", "--requests", "2000",
                      "--warmup", "20", "--fault", "restart-broker@1.5"]) as proc:
        out, _ = proc.communicate(timeout=300)
        children = [p.pid for p in psutil.Process(proc.pid).children(recursive=True)] if proc.poll() is None else []
    case = json.loads(next(out_dir.glob("*/result.json")).read_text())["cases"][0]
    info = case["fault"]["broker_restart"]
    assert info["broker"] == "nats" and info["new_pid"] != info["old_pid"], info
    assert any("refused" in line for line in info["proof"]), info
    assert "private nats server" in out
    assert case["summary"]["lost"] == 0, case["summary"]
    assert proc.returncode == 0, out
    assert not any(psutil.pid_exists(p) for p in children)
    assert not _group(info["new_pid"])
