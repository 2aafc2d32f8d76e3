"""Benchmark the load driver itself: ``python -m taskbench.driver.bench``.

Starts each target pinned to core 0, runs the driver pinned to core 1 (one
process, closed model) for a fixed duration and prints req/s, the driver's CPU
use and a markdown table row. ``serve TARGET`` only starts a pinned target, so
other tools (wrk, Locust) can be measured against the very same setup.
"""

from __future__ import annotations

import argparse
import datetime
import os
import signal
import sys
import time

from taskbench.driver.bench_targets import free_port, path_for, start_server, stop_server
from taskbench.driver.launch import run_load
from taskbench.driver.load_spec import LoadSpec, RequestTemplate
from taskbench.driver.result import LoadResult

TARGETS = ("asgi", "fastapi", "raw")
BODY = '{{"task_id": "{task_id}", "enqueued_at": {enqueued_at}}}'


def _pin(core: int) -> None:
    """Pin this process; spawned driver workers inherit the mask."""
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {core})


def measure(
    target: str,
    *,
    users: int,
    duration: float,
    processes: int,
    body: bool,
    server_core: int,
    driver_core: int,
    warmup: float = 1.0,
) -> LoadResult:
    """One target, one driver run (after a short warm-up); the server is always stopped."""
    port = free_port()
    proc = start_server(target, port, core=server_core)
    try:
        _pin(driver_core)
        template = RequestTemplate(
            host="127.0.0.1", port=port, path=path_for(target), body=BODY if body else None
        )
        if warmup > 0:
            run_load(template, LoadSpec(users=users, duration=warmup, id_prefix="w"))
        spec = LoadSpec(users=users, duration=duration, processes=processes, timeout=10.0)
        return run_load(template, spec)
    finally:
        stop_server(proc)


def row(target: str, res: LoadResult) -> str:
    """Markdown table row: tool, target, req/s, driver CPU % of one core."""
    cpu = ", ".join(f"{c['utilization']:.0%}" for c in res.cpu)
    return f"| taskbench.driver | {target} | {res.rps:,.0f} | {cpu} |"


def _report(target: str, res: LoadResult) -> None:
    lat = res.latency.summary()
    print(
        f"{target:8s} rps={res.rps:,.0f} ok={res.ok} errors={res.errors} "
        f"driver_cpu={res.max_utilization:.0%} p50={lat['p50']:.2f}ms p99={lat['p99']:.2f}ms "
        f"saturated={res.saturated}",
        flush=True,
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m taskbench.driver.bench", description=__doc__)
    sub = parser.add_subparsers(dest="cmd")
    serve = sub.add_parser("serve", help="only start a pinned target until Ctrl-C")
    serve.add_argument("target", choices=TARGETS)
    serve.add_argument("--port", type=int, default=8001)
    serve.add_argument("--core", type=int, default=0)
    parser.add_argument("--targets", default="asgi,fastapi,raw", help="comma-separated")
    parser.add_argument("--users", type=int, default=64)
    parser.add_argument("--duration", type=float, default=10.0)
    parser.add_argument("--processes", type=int, default=1)
    parser.add_argument("--no-body", action="store_true", help="POST without a body")
    parser.add_argument("--server-core", type=int, default=0)
    parser.add_argument("--driver-core", type=int, default=1)
    args = parser.parse_args(argv)

    if args.cmd == "serve":
        # SIGTERM must also stop the target, which runs in its own session.
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
        proc = start_server(args.target, args.port, core=args.core)
        print(f"{args.target} on http://127.0.0.1:{args.port}{path_for(args.target)}", flush=True)
        try:
            while proc.poll() is None:
                time.sleep(0.5)
        except KeyboardInterrupt:
            pass
        finally:
            stop_server(proc)
        return 0

    rows: list[str] = []
    for target in args.targets.split(","):
        if target not in TARGETS:
            parser.error(f"unknown target {target!r}")
        res = measure(
            target,
            users=args.users,
            duration=args.duration,
            processes=args.processes,
            body=not args.no_body,
            server_core=args.server_core,
            driver_core=args.driver_core,
        )
        _report(target, res)
        rows.append(row(target, res))
    print(f"\n{datetime.date.today().isoformat()}, {os.cpu_count()} cores, python {sys.version.split()[0]}")
    print("| tool | target | req/s | driver CPU (% of one core) |")
    print("| --- | --- | ---: | ---: |")
    print("\n".join(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
