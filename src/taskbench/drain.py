"""One drain measurement, run inside a backend's environment (``taskbench drain-case``).

Enqueue N tasks straight through the backend's producer (no HTTP), then start one worker process and
time how long it takes to execute them all. The task is io/simple (one INCRBY, which the ledger's
record joins in one round trip) or ``noop`` (nothing but the record). With the ledger off, the
worker counts executions in memory and flushes the count in batches, so the difference between the
two runs is the ledger's own cost.
"""

from __future__ import annotations

import asyncio
import os
import sys
import time
from pathlib import Path
from typing import Any

from taskbench import backends
from taskbench.backends.base import ServiceContext
from taskbench.ledger import Ledger
from taskbench.messages import NOOP, TaskMessage
from taskbench.procgroup import Managed, tree_cpu_seconds
from taskbench.settings import Settings
from taskbench.wait import WaitTimeoutError, wait_until
from taskbench.workloads import Workloads


async def _enqueue(settings: Settings, tasks: int, parallel: int, workload: str) -> float:
    from fastapi import BackgroundTasks

    backend = backends.load(settings.backend)
    later = BackgroundTasks()
    async with Workloads(settings) as workloads:
        ctx = ServiceContext(settings=settings, workloads=workloads)
        async with backend.producer(ctx) as producer:
            sem = asyncio.Semaphore(parallel)

            async def one(i: int) -> None:
                async with sem:
                    task = TaskMessage(task_id=f"d{i}", workload=workload, value=1, enqueued_at=time.time())
                    await producer.enqueue(task, later)

            started = time.perf_counter()
            await asyncio.gather(*(one(i) for i in range(tasks)))
            return time.perf_counter() - started


#: the workloads a drain may run: a task whose body is one Redis call, or none at all
DRAIN_WORKLOADS = ("io/simple", NOOP)


def measure(settings: Settings, tasks: int, log_dir: Path, timeout: float = 600.0, *,
            workload: str = "io/simple", worker_cpus: list[int] | None = None) -> dict[str, Any]:
    import redis

    if workload not in DRAIN_WORKLOADS:
        raise ValueError(f"a drain runs {' or '.join(DRAIN_WORKLOADS)}, not {workload!r}")
    enqueue_s = asyncio.run(_enqueue(settings, tasks, parallel=64, workload=workload))
    client = redis.Redis.from_url(settings.redis_url)
    ledger = Ledger(settings.prefix)

    def done() -> int:
        if settings.ledger:
            return ledger.executed_count(client)
        return int(client.get(f"{settings.prefix}done") or 0)

    worker = Managed(name="worker", argv=[sys.executable, "-m", "taskbench", "worker"],
                     log_path=log_dir / f"drain-{settings.backend}-{'ledger' if settings.ledger else 'noledger'}.log",
                     cpus=worker_cpus)
    worker.start(os.environ)
    try:
        # the cores the worker may run on, as the kernel has them (the placement asked, or all)
        placed = sorted(os.sched_getaffinity(worker.pid))
        try:
            wait_until(lambda: client.hlen(settings.ready_key), 60, interval=0.005, what="the worker to start",
                       abort=lambda: None if worker.alive() else "the worker exited")
        except WaitTimeoutError as exc:
            raise RuntimeError(f"{exc}: {worker.tail()}") from None
        started = time.perf_counter()
        # the steady rate: from the 10 % mark to the 90 % mark, leaving out the worker's first
        # fetches and the last stragglers, which move a short drain's total time the most
        marks: dict[float, tuple[float, int]] = {}
        cpu: dict[float, float] = {}  # the worker's CPU seconds at each mark

        def drained() -> bool:
            count = done()
            for share in STEADY:
                if share not in marks and count >= share * tasks:
                    marks[share] = (time.perf_counter(), count)
                    cpu[share] = tree_cpu_seconds(worker.pid)
            return count >= tasks

        wait_until(drained, timeout, interval=0.005, raise_on_timeout=False,
                   abort=lambda: None if worker.alive() else "the worker exited")
        drain_s = time.perf_counter() - started
        count = done()
    finally:
        worker.stop(timeout=settings.shutdown_timeout + 5)
        client.close()
    return {
        "backend": settings.backend,
        "workload": workload,
        "ledger": settings.ledger,
        "tasks": tasks,
        "executed": count,
        "enqueue_s": enqueue_s,
        "enqueue_per_s": tasks / enqueue_s,
        "drain_s": drain_s,
        "drain_per_s": count / drain_s if drain_s else None,
        "steady_per_s": _steady(marks),
        # the worker's CPU per task over the same interval: the ledger's cost as the worker pays it,
        # whether or not the worker's core was the bottleneck of the rate
        "worker_cpu_us_per_task": _cpu_per_task(marks, cpu),
        "worker_cpus": placed,
    }


#: the shares of the tasks between which the steady drain rate is measured
STEADY = (0.1, 0.9)


def _cpu_per_task(marks: dict[float, tuple[float, int]], cpu: dict[float, float]) -> float | None:
    """The worker's CPU µs per task executed between the 10 % and the 90 % marks (``cpu`` is read at
    each mark as it is reached); None without both."""
    if len(marks) < len(STEADY):
        return None
    tasks = marks[STEADY[1]][1] - marks[STEADY[0]][1]
    spent = cpu[STEADY[1]] - cpu[STEADY[0]]
    return spent / tasks * 1e6 if tasks > 0 and spent >= 0 else None


def _steady(marks: dict[float, tuple[float, int]]) -> float | None:
    """Tasks per second between the 10 % and the 90 % marks; None if the drain never reached both."""
    if len(marks) < len(STEADY):
        return None
    (t0, n0), (t1, n1) = marks[STEADY[0]], marks[STEADY[1]]
    return (n1 - n0) / (t1 - t0) if t1 > t0 else None
