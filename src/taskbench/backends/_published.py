"""What every published-benchmark script shares: its options, the no-op task's count, its CPU time and
the one JSON line the harness reads. Standard library only: the scripts measure the library alone."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import sys
import threading
import time
from collections.abc import Awaitable, Callable
from typing import Any, NoReturn

#: how the drain is timed: the worker's burst mode returning (arq --burst, streaq --burst, saq burst, a
#: synchronous worker's work(burst=True)), the queue's count of incomplete jobs polled (SAQ's
#: benchmarks/simple.py), or the
#: last task's finish time (python_queue_benchmark: the start time written before the worker starts,
#: the end read off the last job's "finished at")
TIMINGS = ("burst", "poll", "last-finish")
ENQUEUES = ("serial", "gather", "bulk")


def options() -> argparse.Namespace:
    """The shape of one run: the run's Redis and key prefix, the task count, the worker's concurrency,
    how the tasks are enqueued and how the drain is timed, and the published script's library settings
    (``--option NAME=VALUE``)."""
    parser = argparse.ArgumentParser(description=sys.modules["__main__"].__doc__)
    parser.add_argument("--redis-url", required=True)
    parser.add_argument("--prefix", required=True, help="the run's key prefix, taskbench:<run id>:")
    parser.add_argument("--tasks", type=int, required=True)
    parser.add_argument("--concurrency", type=int, required=True)
    parser.add_argument("--enqueue", choices=ENQUEUES, required=True)
    parser.add_argument("--parallel", type=int, default=0, help="gather: at most this many at once (0: all)")
    parser.add_argument("--timing", choices=TIMINGS, required=True)
    parser.add_argument("--timeout", type=float, default=600.0, help="the drain's bound, seconds")
    parser.add_argument("--option", action="append", default=[], help="a library setting, NAME=VALUE")
    args = parser.parse_args()
    args.options = dict(item.split("=", 1) for item in args.option)
    args.run_id = args.prefix.split(":")[1]
    return args


class Done:
    """The no-op task's only work: count itself and note when it finished (thread-safe: the thread
    pools of the synchronous libraries call it from several threads)."""

    def __init__(self) -> None:
        self.count = 0
        self.last = 0.0
        self._lock = threading.Lock()

    def hit(self) -> None:
        with self._lock:
            self.count += 1
            self.last = time.time()

    def wait(self, tasks: int, timeout: float) -> None:
        """Until ``tasks`` ran, polled every 10 ms; a drain past ``timeout`` ends the script in one line."""
        deadline = time.monotonic() + timeout
        while self.count < tasks:
            if time.monotonic() > deadline:
                sys.exit(f"the drain did not end within {timeout:g} s: {self.count} of {tasks} ran")
            time.sleep(0.01)

    async def await_all(self, tasks: int, timeout: float) -> None:
        """:meth:`wait` on an event loop."""
        deadline = time.monotonic() + timeout
        while self.count < tasks:
            if time.monotonic() > deadline:
                sys.exit(f"the drain did not end within {timeout:g} s: {self.count} of {tasks} ran")
            await asyncio.sleep(0.01)


def cpu_seconds() -> float:
    """This process's CPU time, and its children's that have been waited for (a forking library's work horses)."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


async def enqueue_async(args: argparse.Namespace, one: Callable[[int], Awaitable[Any]]) -> float:
    """``args.tasks`` enqueues, awaited one after the other (serial) or gathered, at most
    ``args.parallel`` at once when it is set (the published scripts' semaphore); the seconds it took."""
    started = time.perf_counter()
    sent = 0
    try:
        if args.enqueue == "serial":
            for i in range(args.tasks):
                await one(i)
                sent += 1
        else:
            gate = asyncio.Semaphore(args.parallel or args.tasks)

            async def bounded(i: int) -> None:
                nonlocal sent
                async with gate:
                    await one(i)
                    sent += 1

            await asyncio.gather(*(asyncio.create_task(bounded(i)) for i in range(args.tasks)))
    except Exception as exc:  # any error of the library's enqueue is the run's result
        failed(args, "enqueue", exc, enqueue_s=time.perf_counter() - started, enqueued=sent)
    return time.perf_counter() - started


def failed(args: argparse.Namespace, stage: str, exc: BaseException, *, enqueue_s: float, enqueued: int) -> NoReturn:
    """The library raised where the published script would have crashed: one JSON line naming the error
    (the harness keeps it as the run's result), then the process ends at once, exit 3. At once: the
    published script's gather would leave ``args.tasks`` tasks waiting on its semaphore, and cancelling
    them on the way out of ``asyncio.run`` takes hours at 300,000 in Python 3.11 (each cancelled waiter
    is removed from a deque of all the others)."""
    print(json.dumps({
        "tasks": args.tasks, "executed": 0, "concurrency": args.concurrency, "enqueue": args.enqueue,
        "timing": args.timing, "options": args.options, "error": f"{type(exc).__module__}.{type(exc).__name__}: "
        f"{exc}", "stage": stage, "enqueued": enqueued, "enqueue_s": enqueue_s, "drain_s": None,
        "tasks_per_s": None, "worker_cpu_us_per_task": None,
    }), flush=True)
    sys.stderr.flush()
    os._exit(3)


def enqueue_sync(args: argparse.Namespace, one: Callable[[int], Any]) -> float:
    """``args.tasks`` enqueues one after the other (the synchronous libraries' published loop)."""
    started = time.perf_counter()
    for i in range(args.tasks):
        try:
            one(i)
        except Exception as exc:  # as enqueue_async
            failed(args, "enqueue", exc, enqueue_s=time.perf_counter() - started, enqueued=i)
    return time.perf_counter() - started


def report(args: argparse.Namespace, *, enqueue_s: float, started: float, ended: float, executed: int,
           cpu_s: float) -> None:
    """The script's one JSON line: the drain's seconds and rate as the published script times it, and
    the worker's CPU per task over the drain."""
    drain_s = ended - started
    print(json.dumps({
        "tasks": args.tasks, "executed": executed, "concurrency": args.concurrency,
        "enqueue": args.enqueue, "timing": args.timing, "options": args.options,
        "enqueue_s": enqueue_s, "drain_s": drain_s,
        "tasks_per_s": executed / drain_s if drain_s > 0 else None,
        "worker_cpu_us_per_task": cpu_s / executed * 1e6 if executed else None,
    }), flush=True)
