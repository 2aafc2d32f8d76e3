"""CPU time per request of the reference API or a library floor, called in-process (no sockets, no uvicorn).

Run it with a backend's environment, e.g.::

    .taskbench/envs/saq/bin/python benchmarks/inproc_cost.py saq taskbench
    .taskbench/envs/saq/bin/python benchmarks/inproc_cost.py saq floor --freeze

The app is built and started (its lifespan), then driven through ASGI with ``--in-flight`` requests
at once, ``--batches`` batches of ``--requests`` after one warm-up batch; it prints the process's CPU
time per request, minimum and median over the batches (the minimum is what a busy machine disturbs
least), and the garbage collector's collections and time per generation. It needs the Redis of
``TASKBENCH_REDIS_URL`` (default 127.0.0.1:6379) and writes only under its own run prefix, which it
deletes. ``--freeze`` calls ``gc.freeze()`` after start-up (the reference API does that itself unless
``TASKBENCH_GC_FREEZE=false``). docs/benchmarks.md has what it measured for each change to the API's CPU per request.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import importlib
import json
import os
import statistics
import tempfile
import time
import uuid
from typing import Any


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("backend")
    parser.add_argument("server", choices=("floor", "taskbench"))
    parser.add_argument("--requests", type=int, default=3000, help="requests per batch")
    parser.add_argument("--batches", type=int, default=4)
    parser.add_argument("--in-flight", type=int, default=100)
    parser.add_argument("--freeze", action="store_true", help="gc.freeze() after start-up (the floor)")
    args = parser.parse_args()
    run_id = f"inproc-{uuid.uuid4().hex[:8]}"
    os.environ.setdefault("TASKBENCH_BACKEND", args.backend)
    os.environ.setdefault("TASKBENCH_RUN_ID", run_id)
    os.environ.setdefault("TASKBENCH_METRICS_DIR", tempfile.mkdtemp(prefix="taskbench-inproc-"))
    if args.server == "floor":
        from taskbench import backends

        floor = backends.info(args.backend).floor
        if floor is None:
            raise SystemExit(f"{args.backend} has no floor")
        app = importlib.import_module(floor).create_app()
    else:
        from taskbench.service.app import create_app

        app = create_app()
    import uvloop

    try:
        uvloop.run(_drive(app, args))
    finally:
        _clean(os.environ["TASKBENCH_RUN_ID"], args.backend)


async def _drive(app: Any, args: argparse.Namespace) -> None:
    path = f"/api/v1/incr/io/simple/{args.backend}"
    state: dict[str, Any] = {}
    lifespan_in: asyncio.Queue[dict[str, str]] = asyncio.Queue()
    started = asyncio.Event()

    async def lifespan_send(message: dict[str, Any]) -> None:
        if message["type"].startswith("lifespan.startup"):
            started.set()

    lifespan = asyncio.create_task(app({"type": "lifespan", "asgi": {"version": "3.0"}, "state": state},
                                       lifespan_in.get, lifespan_send))
    await lifespan_in.put({"type": "lifespan.startup"})
    await started.wait()
    if args.freeze:
        gc.collect()
        gc.freeze()
    collections: dict[int, list[float]] = {}
    began = [0.0]

    def on_gc(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            began[0] = time.process_time()
        else:
            collections.setdefault(info["generation"], []).append(time.process_time() - began[0])

    gc.callbacks.append(on_gc)
    per_request = []
    for batch in range(args.batches + 1):
        cpu = time.process_time()
        for _ in range(0, args.requests, args.in_flight):
            await asyncio.gather(*(_one(app, path, state) for _ in range(args.in_flight)))
        await asyncio.sleep(0.2)  # tasks that run after their response (background) finish
        if batch:  # the first batch warms up
            per_request.append(1e6 * (time.process_time() - cpu) / args.requests)
    gc.callbacks.remove(on_gc)
    await lifespan_in.put({"type": "lifespan.shutdown"})
    await asyncio.wait_for(lifespan, 10)
    total = args.requests * (args.batches + 1)
    print(f"{args.backend} {args.server}{' (frozen)' if args.freeze else ''}: CPU µs a request, min "
          f"{min(per_request):.0f}, median {statistics.median(per_request):.0f} ({args.batches} batches of "
          f"{args.requests}, {args.in_flight} in flight)")
    print("  gc per generation over", total, "requests:", ", ".join(
        f"gen {g}: {len(t)} collections, {1000 * sum(t):.0f} ms" for g, t in sorted(collections.items())))


async def _one(app: Any, path: str, state: dict[str, Any]) -> None:
    body = json.dumps({"value": 1, "task_id": uuid.uuid4().hex, "enqueued_at": time.time()}).encode()
    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST",
             "scheme": "http", "path": path, "raw_path": path.encode(), "query_string": b"", "root_path": "",
             "headers": [(b"host", b"127.0.0.1"), (b"content-type", b"application/json"),
                         (b"content-length", str(len(body)).encode())],
             "client": ("127.0.0.1", 5), "server": ("127.0.0.1", 80), "state": dict(state)}
    sent = False
    status: list[int] = []

    async def receive() -> dict[str, Any]:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        await asyncio.Event().wait()  # no disconnect while the request runs
        raise AssertionError

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            status.append(message["status"])

    await app(scope, receive, send)
    if status != [202]:
        raise SystemExit(f"{path} answered {status}")


def _clean(run_id: str, backend: str) -> None:
    import redis

    from taskbench import backends
    from taskbench.harness.keys import delete_run_keys

    client = redis.Redis.from_url(os.environ.get("TASKBENCH_REDIS_URL", "redis://127.0.0.1:6379/0"))
    try:
        delete_run_keys(client, run_id, backends.info(backend))
    finally:
        client.close()


if __name__ == "__main__":
    main()
