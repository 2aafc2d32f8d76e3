"""The FastAPI app of the HTTP scenarios (seeds 001, 002, 004), configured by TASKBENCH_APP_* variables.

Served as ``taskbench.scenarios.asgi:app`` by uvicorn, hypercorn or granian. Routes:

- ``GET /async-sleep``: ``async def`` + ``await asyncio.sleep(delay)`` (seed 001, case 1);
- ``GET /def-sleep``: ``def`` + ``time.sleep(delay)``, run in the AnyIO thread pool (seed 001 case 2,
  seed 004's request that holds its thread);
- ``GET /def-sleep-model``: the same with a response model (a return annotation). FastAPI then
  validates the returned value in the thread pool too: a second trip that queues behind every
  request waiting for a thread, so under saturation responses leave in bursts;
- ``GET /async-blocking``: ``async def`` + ``time.sleep(delay)``: the blocked event loop (seed 001 case 3);
- ``GET /hello``: seed 002's ``def read_root(): return {"Hello": "World"}``;
- ``GET /stats``: this process's peak of requests in flight inside the endpoints.

The seeds' endpoints have no return annotation, so no response model: the routes say
``response_model=None`` to do the same, except ``/def-sleep-model``.

Middleware (seed 002): ``TASKBENCH_APP_MIDDLEWARE`` = none | base | asgi, ``..._LAYERS`` stacked, each
doing ``..._MIDDLEWARE_WORK`` = pass | write (1000 lines to a file, blocking) | sleep (``await
asyncio.sleep(..._MIDDLEWARE_SLEEP)``). ``TASKBENCH_APP_THREAD_LIMIT`` sets the AnyIO default thread
limiter (FastAPI's ``def`` endpoints run there; 40 tokens unless changed) the current way, through
``anyio.to_thread.current_default_thread_limiter()``, which also works under trio; with
``..._THREAD_LIMIT_VIA=runvar`` it runs seed 004's own line instead,
``RunVar("_default_thread_limiter").set(CapacityLimiter(n))``.
"""

from __future__ import annotations

import asyncio
import json
import os
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from fastapi import FastAPI, Request, Response
from starlette.middleware.base import BaseHTTPMiddleware
from starlette.types import ASGIApp, Receive, Scope, Send


class Config:
    def __init__(self, env: dict[str, str]) -> None:
        def get(name: str, default: str) -> str:
            return env.get(f"TASKBENCH_APP_{name}", default)

        self.delay = float(get("DELAY", "0.05"))
        self.middleware = get("MIDDLEWARE", "none")
        self.layers = int(get("LAYERS", "0"))
        self.work = get("MIDDLEWARE_WORK", "pass")
        self.sleep = float(get("MIDDLEWARE_SLEEP", "0.01"))
        self.thread_limit = int(get("THREAD_LIMIT", "0"))
        self.thread_limit_via = get("THREAD_LIMIT_VIA", "limiter")
        self.stats_dir = Path(get("STATS_DIR", "")) if get("STATS_DIR", "") else None
        self.write_path = (self.stats_dir or Path("/tmp")) / "middleware.log"  # noqa: S108
        if self.middleware not in ("none", "base", "asgi"):
            raise ValueError(f"TASKBENCH_APP_MIDDLEWARE must be none, base or asgi, not {self.middleware!r}")
        if self.thread_limit_via not in ("limiter", "runvar"):
            raise ValueError(f"TASKBENCH_APP_THREAD_LIMIT_VIA must be limiter or runvar, not {self.thread_limit_via!r}")
        if self.work not in ("pass", "write", "sleep"):
            raise ValueError(f"TASKBENCH_APP_MIDDLEWARE_WORK must be pass, write or sleep, not {self.work!r}")


class InFlight:
    """Requests inside the endpoints now, the peak, and the native ids of the threads that ran them (seed
    004: the pool's 40 threads are reused); each goes to STATS_DIR/<pid>.json when it grows."""

    def __init__(self, stats_dir: Path | None) -> None:
        self.now = 0
        self.peak = 0
        self.served = 0
        self.thread_ids: set[int] = set()
        self.lock = threading.Lock()
        self.path = stats_dir / f"{os.getpid()}.json" if stats_dir else None

    def enter(self) -> None:
        with self.lock:
            self.now += 1
            self.served += 1
            thread = threading.get_native_id()
            grew = thread not in self.thread_ids or self.now > self.peak
            self.thread_ids.add(thread)
            self.peak = max(self.peak, self.now)
            if grew and self.path is not None:
                tmp = self.path.with_suffix(".tmp")
                tmp.write_text(json.dumps({"pid": os.getpid(), "peak": self.peak,
                                           "threads": threading.active_count(),
                                           "thread_ids": len(self.thread_ids)}))
                tmp.replace(self.path)

    def leave(self) -> None:
        with self.lock:
            self.now -= 1


class HTTPMiddleware:
    """The dispatch of seed 002's BaseHTTPMiddleware."""

    def __init__(self, config: Config) -> None:
        self.config = config

    async def __call__(self, request: Request, call_next: Callable[[Request], Awaitable[Response]]) -> Response:
        await _work(self.config, "HTTPMiddleware\n")
        return await call_next(request)


class ASGIMiddleware:
    """Seed 002's pure ASGI middleware."""

    def __init__(self, app: ASGIApp, config: Config) -> None:
        self.app = app
        self.config = config

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await _work(self.config, "ASGIMiddleware\n")
        await self.app(scope, receive, send)


async def _work(config: Config, line: str) -> None:
    if config.work == "write":
        with config.write_path.open("a") as fh:  # blocking on purpose: the seed's case 3
            fh.write(line * 1000)
    elif config.work == "sleep":
        await asyncio.sleep(config.sleep)


def create_app(env: dict[str, str] | None = None) -> FastAPI:
    config = Config(dict(os.environ) if env is None else env)
    inflight = InFlight(config.stats_dir)

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        if config.thread_limit and config.thread_limit_via == "runvar":
            # seed 004's way, verbatim: a new RunVar of that name. AnyIO 4 keys run variables by the
            # RunVar object, not by its name, so this does not reach the limiter AnyIO uses (measured).
            from anyio import CapacityLimiter
            from anyio.lowlevel import RunVar

            RunVar[CapacityLimiter]("_default_thread_limiter").set(CapacityLimiter(config.thread_limit))
        elif config.thread_limit:
            import anyio.to_thread

            anyio.to_thread.current_default_thread_limiter().total_tokens = config.thread_limit
        yield

    app = FastAPI(lifespan=lifespan)

    @app.get("/health")
    async def health() -> dict[str, str]:
        return {"status": "ok"}

    @app.get("/stats")
    async def stats() -> dict[str, Any]:
        import anyio.to_thread

        return {"pid": os.getpid(), "peak": inflight.peak, "now": inflight.now, "served": inflight.served,
                "thread_ids": len(inflight.thread_ids),
                "thread_limit": anyio.to_thread.current_default_thread_limiter().total_tokens}

    @app.get("/hello", response_model=None)
    def read_root() -> dict[str, str]:
        return {"Hello": "World"}

    @app.get("/async-sleep", response_model=None)
    async def async_sleep() -> dict[str, str]:
        inflight.enter()
        try:
            await asyncio.sleep(config.delay)
        finally:
            inflight.leave()
        return {"status": "ok"}

    @app.get("/def-sleep", response_model=None)
    def def_sleep() -> dict[str, str]:
        inflight.enter()
        try:
            time.sleep(config.delay)
        finally:
            inflight.leave()
        return {"status": "ok"}

    @app.get("/def-sleep-model")
    def def_sleep_model() -> dict[str, str]:
        return def_sleep()

    @app.get("/async-blocking", response_model=None)
    async def async_blocking() -> dict[str, str]:
        inflight.enter()
        try:
            time.sleep(config.delay)  # the mistake seed 001 measures: the loop stops  # noqa: ASYNC251
        finally:
            inflight.leave()
        return {"status": "ok"}

    for _ in range(config.layers if config.middleware != "none" else 0):
        if config.middleware == "base":
            app.add_middleware(BaseHTTPMiddleware, dispatch=HTTPMiddleware(config))
        else:
            app.add_middleware(ASGIMiddleware, config=config)
    return app

