"""Benchmark targets for :mod:`taskbench.driver.bench` and how to start/stop them.

- ``asgi``: a bare ASGI hello app under uvicorn (httptools, uvloop, one worker)
- ``fastapi``: a FastAPI ``async def`` hello endpoint under the same uvicorn setup
- ``raw``: a trivially fast uvloop Protocol server answering a fixed response,
  to find the driver's own ceiling once uvicorn stops being the bottleneck.

Each target runs in its own session (process group), pinned to one core, and
is stopped by pid: SIGTERM, then SIGKILL after a timeout.
"""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]

_HELLO = b'{"message":"hello"}'


async def asgi_app(
    scope: Scope,
    receive: Callable[[], Awaitable[Message]],
    send: Callable[[Message], Awaitable[None]],
) -> None:
    """Bare ASGI hello: drains the request body, answers 200 JSON."""
    if scope["type"] != "http":
        return  # lifespan: uvicorn's 'auto' copes with an app that ignores it
    more = True
    while more:
        more = (await receive()).get("more_body", False)
    await send(
        {
            "type": "http.response.start",
            "status": 200,
            "headers": [(b"content-type", b"application/json")],
        }
    )
    await send({"type": "http.response.body", "body": _HELLO})


def fastapi_app() -> Any:
    """FastAPI app factory (imported lazily so driver processes never load FastAPI)."""
    from fastapi import FastAPI

    app = FastAPI()

    @app.post("/hello")
    async def hello() -> dict[str, str]:
        return {"message": "hello"}

    return app


class _RawHello(asyncio.Protocol):
    """Answers every request head with a fixed response; bodies must be empty."""

    RESPONSE = (
        b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
        b"Content-Length: " + str(len(_HELLO)).encode() + b"\r\n\r\n" + _HELLO
    )

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport
        self.tail = b""

    def data_received(self, data: bytes) -> None:
        data = self.tail + data
        n = data.count(b"\r\n\r\n")
        self.tail = data[data.rfind(b"\r\n\r\n") + 4 :] if n else data
        if n:
            self.transport.write(self.RESPONSE * n)  # type: ignore[attr-defined]


async def _serve_raw(port: int) -> None:
    loop = asyncio.get_running_loop()
    server = await loop.create_server(_RawHello, "127.0.0.1", port, backlog=1024)
    async with server:
        await server.serve_forever()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def server_argv(target: str, port: int) -> list[str]:
    """Command line that serves ``target`` on 127.0.0.1:``port``."""
    if target == "raw":
        return [sys.executable, "-m", "taskbench.driver.bench_targets", str(port)]
    app = {
        "asgi": ["taskbench.driver.bench_targets:asgi_app"],
        "fastapi": ["taskbench.driver.bench_targets:fastapi_app", "--factory"],
    }[target]
    return [
        sys.executable, "-m", "uvicorn", *app,
        "--host", "127.0.0.1", "--port", str(port),
        "--loop", "uvloop", "--http", "httptools",
        "--no-access-log", "--log-level", "warning",
    ]  # fmt: skip


def path_for(target: str) -> str:
    return "/hello" if target == "fastapi" else "/"


def start_server(target: str, port: int, core: int | None = 0) -> subprocess.Popen[bytes]:
    """Start ``target`` in its own session, pinned to ``core``; wait until it accepts."""
    proc = subprocess.Popen(server_argv(target, port), start_new_session=True)
    if core is not None:
        # Pin before the server creates threads; later threads inherit the mask.
        os.sched_setaffinity(proc.pid, {core})
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{target} server exited with {proc.returncode}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return proc
        except OSError:
            time.sleep(0.1)
    stop_server(proc)
    raise RuntimeError(f"{target} server did not start listening on {port}")


def stop_server(proc: subprocess.Popen[bytes], timeout: float = 5.0) -> None:
    """SIGTERM by pid, then SIGKILL if it has not exited within ``timeout``."""
    if proc.poll() is not None:
        return
    os.kill(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()


if __name__ == "__main__":
    try:
        import uvloop

        uvloop.run(_serve_raw(int(sys.argv[1])))
    except KeyboardInterrupt:
        pass
