"""Test helpers: start the real API as a process and talk HTTP/1.1 to it over loopback."""

from __future__ import annotations

import http.client
import json
import os
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from taskbench.harness.processes import ProcessSet
from taskbench.harness.redis_server import free_port


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
    """Run ``taskbench serve`` with these TASKBENCH_* variables; yield its port."""
    port = free_port()
    with ProcessSet({**os.environ, **env}, stop_timeout=10) as procs:
        proc = procs.start("api", [python, "-m", "taskbench", "serve", "--port", str(port)],
                           tmp / "api.log")
        deadline = time.monotonic() + 30
        while True:
            try:
                status, _ = request(port, "GET", "/health")
                if status == 200:
                    break
            except OSError:
                pass
            assert proc.alive(), f"API exited: {proc.tail()}"
            assert time.monotonic() < deadline, f"API not ready: {proc.tail()}"
            time.sleep(0.05)
        yield port
