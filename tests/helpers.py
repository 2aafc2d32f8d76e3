"""Test helpers: start the real API as a process and talk HTTP/1.1 to it over loopback."""

from __future__ import annotations

import http.client
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

import psutil
from click.testing import Result

from taskbench.harness.processes.stack import Stack
from taskbench.net import free_port, healthy


def request(port: int, method: str, path: str, body: bytes | str | None = None,
            headers: dict[str, str] | None = None) -> tuple[int, Any]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.request(method, path, body=body, headers=headers or {"Content-Type": "application/json"})
        resp = conn.getresponse()
        raw = resp.read()
        try:
            return resp.status, json.loads(raw)
        except ValueError:
            return resp.status, raw.decode(errors="replace")
    finally:
        conn.close()


@contextmanager
def served(tmp: Path, env: dict[str, str], python: str = sys.executable) -> Iterator[int]:
    """Run ``taskbench serve`` with these TASKBENCH_* variables (through the harness's Stack); yield its port."""
    port = free_port()
    with Stack({**os.environ, **env}, name=f"test-api-{port}", stop_timeout=10) as stack:
        stack.start("api", [python, "-m", "taskbench", "serve", "--port", str(port)], tmp / "api.log")
        stack.wait_ready(lambda: healthy(port), timeout=30,
                         what=f"the API on port {port} to answer /health (log: {tmp / 'api.log'})")
        yield port


@contextmanager
def harness_cli(args: list[str], **popen: Any) -> Iterator[subprocess.Popen[str]]:
    """Start ``taskbench ARGS`` in a session of its own, its output piped as text.

    However the test ends, nothing it started outlives it: a harness still running gets SIGTERM
    (its own stop path), then everything left of its tree is killed by pid.
    """
    proc = subprocess.Popen([sys.executable, "-m", "taskbench", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True, **popen)
    tree = psutil.Process(proc.pid)
    started: dict[int, psutil.Process] = {}
    try:
        yield proc
    finally:
        if proc.poll() is None:
            with suppress(psutil.Error):
                started.update((p.pid, p) for p in tree.children(recursive=True))
            proc.terminate()
            try:
                proc.communicate(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.communicate()
            for child in started.values():
                with suppress(psutil.Error):
                    child.kill()
        if proc.stdout is not None:
            proc.stdout.close()


def assert_one_line_error(result: Result, message: str, code: int = 2) -> None:
    """The command failed with ``code`` and a message, not an unhandled exception."""
    assert result.exit_code == code, (result.exit_code, result.stdout, result.stderr, result.exception)
    assert not (result.exception and not isinstance(result.exception, SystemExit)), result.exception
    assert message in result.stderr, result.stderr
    assert "Traceback" not in result.stderr
