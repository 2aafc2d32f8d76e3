"""What one ledger record costs a worker against the bare INCRBY it replaces, apart from any library.

Run it with a backend's environment (its redis-py and hiredis), e.g.::

    .taskbench/envs/dramatiq/bin/python benchmarks/record_cost.py redis://127.0.0.1:6379/0

It awaits ``--tasks`` ``INCRBY`` calls, then as many ``Ledger.record`` calls (the worker's
script: the task's INCRBY, the count and the times), then the same three writes as a MULTI/EXEC
pipeline (the other atomic way), ``--rounds`` times, ``--concurrency`` of them in flight at once (1:
one after the other; 10: as a worker at concurrency 10 runs its tasks), and prints per call the wall
time and this process's CPU time; then Redis's own time per call of each command (``INFO
commandstats``, cumulative since the server started: use a private server for clean figures). It
writes only keys under ``tbcost:<pid>:``, which it deletes. docs/benchmarks.md has what it measured.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import time
from collections.abc import Awaitable, Callable

import redis.asyncio as aioredis

from taskbench.ledger import Ledger


async def _calls(tasks: int, concurrency: int, call: Callable[[int], Awaitable[object]]) -> None:
    """``call(0)`` ... ``call(tasks - 1)``, ``concurrency`` of them in flight at once."""
    if concurrency == 1:
        for i in range(tasks):
            await call(i)
        return
    slots = asyncio.Semaphore(concurrency)

    async def one(i: int) -> None:
        async with slots:
            await call(i)

    for start in range(0, tasks, 1_000):  # a bounded number of coroutines alive at once
        await asyncio.gather(*(one(i) for i in range(start, min(tasks, start + 1_000))))


async def measure(url: str, tasks: int, rounds: int, concurrency: int = 1) -> None:
    client = aioredis.Redis.from_url(url, max_connections=concurrency + 2)
    prefix = f"tbcost:{os.getpid()}:"
    ledger = Ledger(prefix)
    counter = f"{prefix}c"
    try:
        for n in range(rounds):
            wall, cpu = time.perf_counter(), time.process_time()
            await _calls(tasks, concurrency, lambda _: client.incrby(counter, 1))
            incr_wall = (time.perf_counter() - wall) / tasks * 1e6
            incr_cpu = (time.process_time() - cpu) / tasks * 1e6
            now = time.time()
            wall, cpu = time.perf_counter(), time.process_time()

            def record(i: int, n: int = n, now: float = now) -> Awaitable[int]:
                return ledger.record(client, f"r{n}-{i}", now, now, now, incr=(counter, 1))

            await _calls(tasks, concurrency, record)
            record_wall = (time.perf_counter() - wall) / tasks * 1e6
            record_cpu = (time.process_time() - cpu) / tasks * 1e6
            # the same three writes as one MULTI/EXEC (redis-py's transaction pipeline), without Lua
            times = f"{now:.6f} {now:.6f} {now:.6f}"

            async def multi(i: int, n: int = n, times: str = times) -> None:
                async with client.pipeline(transaction=True) as pipe:
                    pipe.incrby(counter, 1)
                    pipe.hincrby(ledger.count_key, f"m{n}-{i}", 1)
                    pipe.hset(ledger.times_key, f"m{n}-{i}", times)
                    await pipe.execute()

            wall, cpu = time.perf_counter(), time.process_time()
            await _calls(tasks, concurrency, multi)
            multi_wall = (time.perf_counter() - wall) / tasks * 1e6
            multi_cpu = (time.process_time() - cpu) / tasks * 1e6
            print(f"round {n + 1}: INCRBY {incr_wall:.1f} µs a call (client CPU {incr_cpu:.1f}); "
                  f"record {record_wall:.1f} µs (client CPU {record_cpu:.1f}); "
                  f"as MULTI/EXEC {multi_wall:.1f} µs (client CPU {multi_cpu:.1f})")
        stats = await client.info("commandstats")
        for command in ("incrby", "evalsha", "exec"):
            entry = stats.get(f"cmdstat_{command}") or {}
            print(f"Redis: {command.upper()} {entry.get('usec_per_call', '?')} µs a call "
                  f"({entry.get('calls', 0)} calls since the server started)")
    finally:
        await client.delete(ledger.count_key, ledger.times_key, counter)
        await client.aclose()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("redis_url", help="the Redis to measure against (a private one for clean server figures)")
    parser.add_argument("--tasks", type=int, default=20_000, help="calls of each kind per round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--concurrency", type=int, default=1, help="calls in flight at once (a worker's concurrency)")
    args = parser.parse_args()
    if not 1 <= args.concurrency <= 1_000:
        parser.error("--concurrency must be between 1 and 1000")
    asyncio.run(measure(args.redis_url, args.tasks, args.rounds, args.concurrency))


if __name__ == "__main__":
    main()
