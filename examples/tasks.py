"""Example task bodies for ``taskbench run --workload examples/tasks.py:<name>``.

Each takes the payload (a dict: ``--payload``'s template with ``{task_id}`` filled in, or
``{"task_id": ...}`` without one). See the README's "Benchmark your own task".

- ``call_stub`` (async): an HTTP GET to a local stub that answers after ``latency_ms``; the stub
  (``examples/stub.py``) is started by the first call that finds none on ``stub_port``, and exits
  10 s after its last request.
- ``insert_row`` (sync): one INSERT into PostgreSQL (``dsn`` in the payload, or TASKBENCH_EXAMPLE_DSN);
  needs ``--with "psycopg[binary]"``.
- ``hold_gil`` (sync): a pure-Python loop of ``cpu_ms`` milliseconds: holds the GIL the whole time.
- ``leak`` (sync): keeps ``leak_kb`` KiB per call for good: the worker's memory grows with the tasks.
- ``flaky`` (async): ``call_stub``, then raises ``FlakyError`` on 1 % of calls (those whose task id
  hashes to 0 modulo 100: the same ids on every backend).
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import threading
import time
import zlib
from pathlib import Path
from typing import Any

STUB = Path(__file__).with_name("stub.py")
_stub_lock = threading.Lock()
_kept: list[bytes] = []  # leak: what is never freed
_connections = threading.local()


class FlakyError(Exception):
    """What ``flaky`` raises on 1 % of its calls."""


def _listening(port: int) -> bool:
    import socket

    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1.0):
            return True
    except OSError:
        return False


def ensure_stub(port: int) -> None:
    """Start the stub on ``port`` unless one answers there (in this process's group: it stops with it)."""
    with _stub_lock:
        if _listening(port):
            return
        subprocess.Popen([sys.executable, str(STUB), "--port", str(port)], stdin=subprocess.DEVNULL,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 10
        while not _listening(port):
            if time.monotonic() > deadline:
                raise ConnectionError(f"the stub did not start on 127.0.0.1:{port}")
            time.sleep(0.05)


async def _get(port: int, latency_ms: int) -> int:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(f"GET /?delay_ms={latency_ms} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
                     "Connection: close\r\n\r\n".encode())
        await writer.drain()
        status = await reader.readline()
        await reader.read()
    finally:
        writer.close()
    return int(status.split()[1])


async def call_stub(payload: dict[str, Any]) -> None:
    """An HTTP call to the local stub, which answers after ``latency_ms`` (default 20)."""
    port = int(payload.get("stub_port", 18765))
    latency = int(payload.get("latency_ms", 20))
    try:
        status = await _get(port, latency)
    except ConnectionError:  # no stub yet (or it exited when idle): start one, then call again
        await asyncio.get_running_loop().run_in_executor(None, ensure_stub, port)
        status = await _get(port, latency)
    if status != 200:
        raise RuntimeError(f"stub answered {status}")


async def flaky(payload: dict[str, Any]) -> None:
    """``call_stub``, then ``FlakyError`` for 1 % of task ids."""
    await call_stub(payload)
    task_id = str(payload.get("task_id", ""))
    if zlib.crc32(task_id.encode()) % 100 == 0:
        raise FlakyError(f"task {task_id} failed on purpose")


def hold_gil(payload: dict[str, Any]) -> int:
    """Pure-Python arithmetic for ``cpu_ms`` ms (default 80) of this thread's CPU time."""
    until = time.thread_time() + int(payload.get("cpu_ms", 80)) / 1000
    acc = 0
    while time.thread_time() < until:
        for i in range(1000):
            acc = (acc + i * i) % 1_000_003
    return acc


def leak(payload: dict[str, Any]) -> None:
    """Keep ``leak_kb`` KiB (default 100) for the life of the process."""
    _kept.append(os.urandom(int(payload.get("leak_kb", 100)) * 1024))


def insert_row(payload: dict[str, Any]) -> None:
    """One INSERT into ``taskbench_example`` (created on first use), over this thread's connection."""
    import psycopg  # --with "psycopg[binary]"

    conn = getattr(_connections, "conn", None)
    if conn is None or conn.closed:
        dsn = payload.get("dsn") or os.environ.get("TASKBENCH_EXAMPLE_DSN")
        if not dsn:
            raise ValueError("insert_row needs a dsn in the payload or TASKBENCH_EXAMPLE_DSN")
        conn = _connections.conn = psycopg.connect(dsn, autocommit=True)
        conn.execute("CREATE TABLE IF NOT EXISTS taskbench_example (task_id text PRIMARY KEY, at timestamptz)")
    conn.execute("INSERT INTO taskbench_example (task_id, at) VALUES (%s, now()) ON CONFLICT DO NOTHING",
                 (str(payload.get("task_id")),))
