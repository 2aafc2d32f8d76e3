"""The CLI: instant help, one-line errors, interrupts that leave no process behind, dead workers reported."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from contextlib import suppress
from pathlib import Path
from typing import Any

import psutil
import pytest
from click.testing import Result

from taskbench.wait import wait_until
from tests.helpers import assert_one_line_error, harness_cli

Cli = Callable[..., Result]

TB = [sys.executable, "-m", "taskbench"]


def _cli(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*TB, *args], capture_output=True, text=True, timeout=timeout, check=False)


def test_help_lists_commands() -> None:
    out = _cli("--help")
    assert out.returncode == 0
    for command in ("run", "choose", "compare", "report", "backends"):
        assert command in out.stdout


def test_unreachable_redis_is_one_line(out_dir: Path) -> None:
    """In a process of its own, as a user runs it: the exit code and stderr of the real command."""
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
        (["--versions", "article-004"], "--versions must be lock or article-000"),
        (["--versions", "article-000", "--backends", "arq,taskiq"],
         "--versions article-000 holds arq, saq, faststream-pubsub, celery at a seed's versions "
         "(pinned/article-000/pyproject.toml), not taskiq"),
        (["--versions", "article-000", "--backends", "celery", "--concurrency", "1"],
         "celery on --versions article-000 runs with --option celery.pool=prefork (pinned/article-000/pyproject.toml)"),
        (["--versions", "article-000", "--backends", "faststream-pubsub", "--concurrency", "2"],
         "--concurrency 2: faststream-pubsub on --versions article-000 runs at most 1 at a time "
         "(pinned/article-000/pyproject.toml)"),
    ],
)
def test_bad_options_are_one_line(args: list[str], message: str, redis_url: str, out_dir: Path, cli: Cli) -> None:
    assert_one_line_error(cli("run", "--redis-url", redis_url, "--output", str(out_dir), *args), message)


def test_api_port_in_use(redis_url: str, out_dir: Path, cli: Cli) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        port = sock.getsockname()[1]
        out = cli("run", "--backends", "background", "--redis-url", redis_url, "--output", str(out_dir),
                  "--api-port", str(port), "--requests", "10")
    assert_one_line_error(out, f"port 127.0.0.1:{port} is in use")


def test_report_renders_and_rejects_garbage(tmp_path: Path, cli: Cli) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text("{nope")
    assert_one_line_error(cli("report", str(bad)), "is not JSON (line 1")


def _read_until(proc: subprocess.Popen[str], marker: str, timeout: float = 120) -> str:
    """The harness's output up to and including the first line with ``marker``."""
    assert proc.stdout is not None
    lines: list[str] = []
    deadline = time.monotonic() + timeout
    for line in proc.stdout:
        lines.append(line)
        if marker in line:
            return "".join(lines)
        assert time.monotonic() < deadline, "".join(lines)
    raise AssertionError(f"the harness ended before printing {marker!r}:\n{''.join(lines)}")


@pytest.mark.slow
def test_interrupt_mid_load_leaves_no_process(redis_url: str, out_dir: Path) -> None:
    with harness_cli(
        ["run", "--backends", "arq", "--redis-url", redis_url, "--output", str(out_dir),
         "--duration", "60", "--users", "10", "--warmup", "0"],
        # as a shell starts a background job: SIGINT ignored, an "ignore" Python would inherit
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN),
    ) as proc:
        harness = psutil.Process(proc.pid)
        _read_until(proc, "load:")

        def driving() -> list[psutil.Process]:
            children = harness.children(recursive=True)
            return children if len(children) >= 3 else []

        # the API, the worker and the load driver at least
        started = wait_until(driving, 60, what="the load driver's process")
        assert started is not None
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
        before = _read_until(proc, "load:")  # past the warm-up: the load has begun

        def worker() -> psutil.Process | None:
            for child in harness.children(recursive=True):
                with suppress(psutil.NoSuchProcess):
                    if "worker" in child.cmdline():
                        return child
            return None

        victim = wait_until(worker, 30, what="the worker process")
        assert victim is not None
        victim.kill()
        out, _ = proc.communicate(timeout=180)
        out = before + out
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


@pytest.mark.parametrize("command", ["run", "scenarios", "report", "compare", "overhead", "drain", "up", "serve",
                                     "worker", "backends", "ceiling"])
def test_every_commands_help_prints(command: str) -> None:
    # rich renders option help as markup: a "[/P]" in a help text once made `run --help` a traceback
    out = subprocess.run([sys.executable, "-m", "taskbench", command, "--help"], capture_output=True, text=True,
                         timeout=60, check=False)
    assert out.returncode == 0 and "Usage" in out.stdout and "Traceback" not in out.stdout + out.stderr, \
        out.stdout[-500:] + out.stderr[-500:]


def test_run_help_groups_its_options_in_panels_with_short_flags() -> None:
    from taskbench.cli.run_options import PANELS

    out = subprocess.run([sys.executable, "-m", "taskbench", "run", "--help"], capture_output=True, text=True,
                         timeout=60, check=False, env={**os.environ, "COLUMNS": "200"})
    assert out.returncode == 0, out.stderr[-500:]
    for panel in PANELS:
        assert f"─ {panel} ─" in out.stdout, panel
    for short in ("-b", "-w", "-r", "-d", "-n", "-o", "-f", "-t", "-s"):
        assert f" {short} " in out.stdout, short


def test_version_prints_the_installed_version() -> None:
    from importlib.metadata import version

    out = subprocess.run([sys.executable, "-m", "taskbench", "--version"], capture_output=True, text=True,
                         timeout=60, check=False)
    assert out.returncode == 0 and out.stdout.strip() == f"taskbench {version('taskbench')}", out.stdout + out.stderr


def test_help_lists_the_users_commands_only() -> None:
    import typer

    from taskbench.cli import app

    group: Any = typer.main.get_command(app)
    shown = [name for name, command in group.commands.items() if not command.hidden]
    assert len(shown) <= 10, shown
    assert {"run", "choose", "compare", "backends"} <= set(shown)
    assert not {"serve", "worker", "drive", "collector"} & set(shown)
    out = subprocess.run([sys.executable, "-m", "taskbench", "--help"], capture_output=True, text=True, timeout=60,
                         check=False)
    assert "drain" in out.stdout and "overhead" in out.stdout  # the epilog names the one-layer commands


def test_the_launcher_answers_version_before_building_anything(tmp_path: Path) -> None:
    from importlib.metadata import version

    launcher = Path(__file__).resolve().parents[2] / "taskbench"
    # no uv on PATH and a fresh environment folder: --version must need neither
    env = {"PATH": "/usr/bin:/bin", "UV_PROJECT_ENVIRONMENT": str(tmp_path / "env")}
    out = subprocess.run(["sh", str(launcher), "--version"], capture_output=True, text=True, timeout=30,
                         check=False, env=env)
    assert out.returncode == 0 and out.stdout.strip() == f"taskbench {version('taskbench')}", out.stderr
    assert not (tmp_path / "env").exists()


def test_the_launcher_answers_help_before_building_anything(tmp_path: Path) -> None:
    """On a fresh clone ``./taskbench --help`` prints the kept text (docs/help.txt, which test_pages keeps
    current) at once; it names the user's commands as the CLI's own help does."""
    repo = Path(__file__).resolve().parents[2]
    env = {"PATH": "/usr/bin:/bin", "UV_PROJECT_ENVIRONMENT": str(tmp_path / "env")}
    out = subprocess.run(["sh", str(repo / "taskbench"), "--help"], capture_output=True, text=True, timeout=30,
                         check=False, env=env)
    assert out.returncode == 0 and out.stdout == (repo / "docs" / "help.txt").read_text(encoding="utf-8"), out.stderr
    assert "Usage: taskbench [OPTIONS] COMMAND" in out.stdout and "│ run " in out.stdout and "│ choose " in out.stdout
    assert out.stderr == "" and not (tmp_path / "env").exists()


def test_the_kept_help_is_what_the_cli_prints_at_100_columns() -> None:
    repo = Path(__file__).resolve().parents[2]
    env = {**os.environ, "TERMINAL_WIDTH": "100", "COLUMNS": "100", "NO_COLOR": "1", "TERM": "dumb"}
    out = subprocess.run([str(Path(sys.executable).with_name("taskbench")), "--help"], capture_output=True, text=True,
                         timeout=60, check=False, env=env)
    assert out.returncode == 0, out.stderr
    kept = (repo / "docs" / "help.txt").read_text(encoding="utf-8").splitlines()
    assert [line.rstrip() for line in out.stdout.splitlines()] == kept
