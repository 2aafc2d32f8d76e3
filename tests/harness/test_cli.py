"""The CLI: instant help, one-line errors, interrupts that leave no process behind, dead workers reported."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from tests.helpers import harness_cli

TB = [sys.executable, "-m", "taskbench"]


def _cli(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*TB, *args], capture_output=True, text=True, timeout=timeout, check=False)


def test_help_lists_commands() -> None:
    out = _cli("--help")
    assert out.returncode == 0
    for command in ("run", "serve", "worker", "report", "backends"):
        assert command in out.stdout


def test_unreachable_redis_is_one_line(out_dir: Path) -> None:
    out = _cli("run", "--redis-url", "redis://127.0.0.1:1/0", "--output", str(out_dir))
    assert out.returncode == 2
    assert "cannot reach Redis at 127.0.0.1:1" in out.stderr
    assert "Traceback" not in out.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--backends", "nope"], "unknown backend 'nope'"),
        (["--workload", "io/process"], "unknown workload 'io/process'"),
        (["--model", "open"], "open model needs"),
        (["--users", "0"], "Invalid value"),
        (["--pin", "gpu=0"], "--pin"),
        (["--backends", "arq", "--broker", "nats"], "backend 'arq' does not run on 'nats'"),
        (["--backends", "celery", "--broker", "rabbitmq", "--broker-url", "amqp://guest:guest@127.0.0.1:1/"],
         "cannot reach RabbitMQ at 127.0.0.1:1"),
        (["--backends", "faststream", "--broker", "nats", "--broker-url", "nats://127.0.0.1:1"],
         "cannot reach NATS at 127.0.0.1:1"),
    ],
)
def test_bad_options_are_one_line(args: list[str], message: str, redis_url: str, out_dir: Path) -> None:
    out = _cli("run", "--redis-url", redis_url, "--output", str(out_dir), *args)
    assert out.returncode == 2
    assert message in out.stderr
    assert "Traceback" not in out.stderr


def test_api_port_in_use(redis_url: str, out_dir: Path) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        port = sock.getsockname()[1]
        out = _cli("run", "--backends", "background", "--redis-url", redis_url, "--output", str(out_dir),
                   "--api-port", str(port), "--requests", "10")
    assert out.returncode == 2
    assert f"port 127.0.0.1:{port} is in use" in out.stderr


def test_report_renders_and_rejects_garbage(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text("{nope")
    out = _cli("report", str(bad))
    assert out.returncode == 2
    assert "is not JSON (line 1" in out.stderr


@pytest.mark.slow
def test_interrupt_mid_load_leaves_no_process(redis_url: str, out_dir: Path) -> None:
    with harness_cli(
        ["run", "--backends", "arq", "--redis-url", redis_url, "--output", str(out_dir),
         "--duration", "60", "--users", "10", "--warmup", "0"],
        # as a shell starts a background job: SIGINT ignored, an "ignore" Python would inherit
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN),
    ) as proc:
        harness = psutil.Process(proc.pid)
        assert proc.stdout is not None
        deadline = time.monotonic() + 120
        for line in proc.stdout:
            if "load:" in line or time.monotonic() > deadline:
                break
        time.sleep(1.0)
        started = harness.children(recursive=True)
        assert len(started) >= 3, started  # the API, the worker and the load driver at least
        os.kill(proc.pid, signal.SIGINT)
        proc.communicate(timeout=60)  # reads the rest and closes the pipe
    _, alive = psutil.wait_procs(started, timeout=10)
    assert not alive, [p.cmdline() for p in alive]
    assert proc.returncode == 130


@pytest.mark.slow
def test_dead_worker_is_reported_not_hidden(redis_url: str, out_dir: Path) -> None:
    with harness_cli(
        ["run", "--backends", "arq", "--redis-url", redis_url, "--output", str(out_dir),
         "--requests", "300", "--users", "5", "--warmup", "0", "--io-delay", "0.05",
         "--concurrency", "2", "--drain-timeout", "30"],
    ) as proc:
        harness = psutil.Process(proc.pid)
        deadline = time.monotonic() + 120
        victim = None
        while victim is None and time.monotonic() < deadline:
            for child in harness.children(recursive=True):
                try:
                    if "worker" in child.cmdline():
                        victim = child
                except psutil.NoSuchProcess:
                    continue
            time.sleep(0.2)
        assert victim is not None
        time.sleep(3)  # let the load begin
        victim.kill()
        out, _ = proc.communicate(timeout=180)
    assert proc.returncode == 1, out
    assert "worker-0 died during the run (exit code -9)" in out
    result = json.loads(next(out_dir.glob("*/result.json")).read_text())
    case = result["cases"][0]
    assert case["status"] == "failed"
    assert any("worker-0 died" in f for f in case["failures"])
    # a failed run still gets its report and its line in the index
    assert (out_dir / result["run_id"] / "report.html").read_text().count("<svg") >= 3
    assert f'href="{result["run_id"]}/report.html"' in (out_dir / "index.html").read_text()
    # off a terminal, progress is plain lines
    assert "[arq] drain: done in" in out
