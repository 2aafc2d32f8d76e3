"""One drain measurement, run inside a backend's environment (``taskbench drain-case``).

Enqueue N no-op tasks straight through the backend's producer (no HTTP), then start one worker
process and time how long it takes to execute them all. With the ledger off, the worker counts
executions in memory and flushes the count in batches, so the difference between the two runs is
the ledger's own cost.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from taskbench import backends
from taskbench.backends.base import ServiceContext
from taskbench.ledger import Ledger
from taskbench.messages import NOOP, TaskMessage
from taskbench.settings import Settings
from taskbench.wait import WaitTimeoutError, wait_until
from taskbench.workloads import Workloads


class _Worker:
    """The one worker process of a drain measurement, in its own process group, output to a log.

    Inside a backend's environment there is no harness: this is the little of its process handling
    a measurement needs (start, alive, the log's tail, stop by group: SIGTERM, then SIGKILL).
    """

    def __init__(self, log_path: Path) -> None:
        self.log_path = log_path
        log_path.parent.mkdir(parents=True, exist_ok=True)
        with log_path.open("ab") as log:  # the child keeps its own descriptor
            self.popen = subprocess.Popen(
                [sys.executable, "-m", "taskbench", "worker"], env=os.environ, stdin=subprocess.DEVNULL,
                stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
            )

    def alive(self) -> bool:
        return self.popen.poll() is None

    def tail(self, lines: int = 15) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])

    def stop(self, timeout: float) -> None:
        pgid = self.popen.pid  # start_new_session made the child its group's leader
        _signal_group(pgid, signal.SIGTERM)
        try:
            self.popen.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            _signal_group(pgid, signal.SIGKILL)
            self.popen.wait()
        _signal_group(pgid, signal.SIGKILL)  # whatever is left in its group (a pool child)


def _signal_group(pgid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


async def _enqueue(settings: Settings, tasks: int, parallel: int) -> float:
    from fastapi import BackgroundTasks

    backend = backends.load(settings.backend)
    later = BackgroundTasks()
    async with Workloads(settings) as workloads:
        ctx = ServiceContext(settings=settings, workloads=workloads)
        async with backend.producer(ctx) as producer:
            sem = asyncio.Semaphore(parallel)

            async def one(i: int) -> None:
                async with sem:
                    task = TaskMessage(task_id=f"d{i}", workload=NOOP, value=1, enqueued_at=time.time())
                    await producer.enqueue(task, later)

            started = time.perf_counter()
            await asyncio.gather(*(one(i) for i in range(tasks)))
            return time.perf_counter() - started


def measure(settings: Settings, tasks: int, log_dir: Path, timeout: float = 600.0) -> dict[str, Any]:
    import redis

    enqueue_s = asyncio.run(_enqueue(settings, tasks, parallel=64))
    client = redis.Redis.from_url(settings.redis_url)
    ledger = Ledger(settings.prefix)

    def done() -> int:
        if settings.ledger:
            return ledger.executed_count(client)
        return int(client.get(f"{settings.prefix}done") or 0)

    worker = _Worker(log_dir / f"drain-{settings.backend}-{'ledger' if settings.ledger else 'noledger'}.log")
    try:
        try:
            wait_until(lambda: client.hlen(settings.ready_key), 60, interval=0.005, what="the worker to start",
                       abort=lambda: None if worker.alive() else "the worker exited")
        except WaitTimeoutError as exc:
            raise RuntimeError(f"{exc}: {worker.tail()}") from None
        started = time.perf_counter()
        wait_until(lambda: done() >= tasks, timeout, interval=0.005, raise_on_timeout=False,
                   abort=lambda: None if worker.alive() else "the worker exited")
        drain_s = time.perf_counter() - started
        count = done()
    finally:
        worker.stop(timeout=settings.shutdown_timeout + 5)
        client.close()
    return {
        "backend": settings.backend,
        "ledger": settings.ledger,
        "tasks": tasks,
        "executed": count,
        "enqueue_s": enqueue_s,
        "enqueue_per_s": tasks / enqueue_s,
        "drain_s": drain_s,
        "drain_per_s": count / drain_s if drain_s else None,
    }
