"""A broker at a silent or closed address, or at a port where another server answers: one line naming the
broker with host and port, before anything starts; and a clean-up whose purge cannot finish never raises."""

from __future__ import annotations

import os
import socket
import stat
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from taskbench import brokers
from taskbench.harness import HarnessError
from taskbench.harness.brokers import check_broker
from taskbench.harness.case.stop import purge
from tests.helpers import assert_one_line_error

#: each broker's URL at a port, with another kind's real server on this machine as "another protocol"
URLS = {
    "nats": "nats://127.0.0.1:{port}",
    "rabbitmq": "amqp://guest:guest@127.0.0.1:{port}/",
    "redis": "redis://127.0.0.1:{port}/0",
    "postgres": "postgresql://taskbench:secret@127.0.0.1:{port}/taskbench",
}
OTHER = {"nats": 6379, "rabbitmq": 6379, "redis": 4222, "postgres": 6379}


@pytest.fixture
def silent_port() -> Iterator[int]:
    """A socket that takes connections (the kernel's backlog completes them) and never says a word."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(64)
        yield sock.getsockname()[1]


@pytest.fixture
def closed_port() -> int:
    """A port nobody listens on."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _serving(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
    except OSError:
        return False
    return True


@pytest.mark.parametrize("kind", sorted(URLS))
@pytest.mark.parametrize("address", ["silent", "closed", "another server"])
def test_a_broker_that_does_not_answer_as_one_is_one_line_naming_it(
        kind: str, address: str, silent_port: int, closed_port: int) -> None:
    port = {"silent": silent_port, "closed": closed_port, "another server": OTHER[kind]}[address]
    if address == "another server" and not _serving(port):
        pytest.skip(f"no server on 127.0.0.1:{port} to stand for another protocol")
    url = URLS[kind].format(port=port)
    with pytest.raises(HarnessError) as caught:
        check_broker(kind, url, timeout=1.0)
    message = str(caught.value)
    assert brokers.describe(kind, url) in message and f"127.0.0.1:{port}" in message
    assert "\n" not in message and "secret" not in message


@pytest.mark.parametrize(("kind", "url"), [("nats", "nats://127.0.0.1:4222"),
                                           ("rabbitmq", "amqp://guest:guest@127.0.0.1:5672/")])
def test_a_real_broker_still_passes_its_check(kind: str, url: str) -> None:
    if not _serving(int(url.rsplit(":", 1)[1].strip("/"))):
        pytest.skip(f"no {kind} server on this machine")
    check_broker(kind, url, timeout=3.0)


@pytest.mark.parametrize(("broker", "scheme"), [("nats", "nats://127.0.0.1:{port}"),
                                                ("rabbitmq", "amqp://guest:guest@127.0.0.1:{port}/"),
                                                ("redis", "redis://127.0.0.1:{port}/0")])
def test_run_at_a_silent_broker_port_is_one_line(broker: str, scheme: str, silent_port: int, redis_url: str,
                                                 out_dir: Path, cli: object) -> None:
    url = scheme.format(port=silent_port)
    result = cli("run", "-b", "faststream", "--broker", broker, "--broker-url", url,  # type: ignore[operator]
                 "--redis-url", redis_url, "--output", str(out_dir), "-n", "10")
    assert_one_line_error(result, f"at 127.0.0.1:{silent_port}")
    assert brokers.describe(broker, url).split(" at ")[0] in result.stderr


def _fake_python(tmp_path: Path, body: str) -> Path:
    """A "python" whose ``-m taskbench purge`` is ``body`` (a shell script)."""
    path = tmp_path / "python"
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


@pytest.mark.parametrize(("body", "outcome"), [
    ("exec sleep 600", "failed (no answer in 0.5 s, see purge.log)"),  # a broker that never answers
    ("sleep 600 & exec sleep 600", "failed (no answer in 0.5 s, see purge.log)"),  # and a child of its own
    ("echo nope >&2; exit 3", "failed (exit 3, see purge.log)"),
    ("exit 0", "ok"),
])
def test_a_purge_never_raises_and_leaves_no_process(tmp_path: Path, body: str, outcome: str) -> None:
    python = _fake_python(tmp_path, body)
    before = {p.pid for p in psutil.Process().children(recursive=True)}
    assert purge(python, {"TASKBENCH_TEST_MARK": str(tmp_path)}, tmp_path / "logs", timeout=0.5) == outcome
    assert (tmp_path / "logs" / "purge.log").exists()
    left = [p for p in psutil.process_iter(["environ"]) if p.pid not in before and p.pid != os.getpid()
            and (p.info["environ"] or {}).get("TASKBENCH_TEST_MARK") == str(tmp_path)]
    assert left == []


def test_a_purge_whose_python_is_missing_is_a_failed_outcome(tmp_path: Path) -> None:
    assert purge(tmp_path / "no-python", {}, tmp_path / "logs").startswith("failed (")
