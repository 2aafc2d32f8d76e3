"""One drain measurement, run inside a backend's environment (``taskbench drain-case``).

Enqueue N tasks straight through the backend's producer (no HTTP), then start a worker process and
time how long it takes to execute them all. The task is io/simple (one INCRBY, which the ledger's
record joins in one round trip) or ``noop`` (nothing but the record). With the ledger off, the
worker counts executions in memory and flushes the count in batches, so the difference between the
two runs is the ledger's own cost.

:func:`measure` drains with one worker. :func:`measure_pair` drains two runs at once, one worker with
the ledger on and one with it off, side by side on the same cores, each from its own run's queue: both
see the same machine at the same moments, so a machine whose speed changes from second to second (a
shared VM's does by ±30 %) moves both rates alike and their ratio hardly at all.

A round is bounded in count and in time: it ends when every task ran or after ``seconds``, whichever
comes first. Its steady rate is taken from the 10 % mark to the 90 % mark, each the moment that share of
the tasks ran or that share of the seconds passed, whichever comes first: a backend that drains a few
tasks a second (a forking library starts a process a task) gets a figure from the tasks it ran in its time.
"""

from __future__ import annotations

import asyncio
import os
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from taskbench import backends
from taskbench.backends.base import ServiceContext
from taskbench.ledger import Ledger
from taskbench.messages import NOOP, USER_TASK, WORKLOADS, TaskMessage
from taskbench.payload import fill
from taskbench.procgroup import Managed, tree_cpu_seconds, tree_rss_mb
from taskbench.settings import Settings
from taskbench.wait import WaitTimeoutError, wait_until
from taskbench.workloads import Workloads

if TYPE_CHECKING:
    import redis


async def _enqueue(settings: Settings, tasks: int, parallel: int, workload: str,
                   payload: dict[str, Any] | None = None) -> float:
    from fastapi import BackgroundTasks

    from taskbench.backends.base import PreparesBroker

    backend = backends.load(settings.backend)
    if isinstance(backend, PreparesBroker):  # a PostgreSQL queue's schema, before its producer and worker
        await backend.prepare_broker(settings)
    later = BackgroundTasks()
    async with Workloads(settings) as workloads:
        ctx = ServiceContext(settings=settings, workloads=workloads)
        async with backend.producer(ctx) as producer:
            sem = asyncio.Semaphore(parallel)

            async def one(i: int) -> None:
                async with sem:
                    task_id = f"d{i}"
                    task = TaskMessage(task_id=task_id, workload=workload, value=1, enqueued_at=time.time(),
                                       payload=None if payload is None else fill(payload, task_id))
                    await producer.enqueue(task, later)

            started = time.perf_counter()
            await asyncio.gather(*(one(i) for i in range(tasks)))
            return time.perf_counter() - started


#: the workloads a drain may run: a task whose body is one Redis call, or none at all
DRAIN_WORKLOADS = ("io/simple", NOOP)
#: the shares of the tasks (or of the round's seconds) between which the steady drain rate is measured
STEADY = (0.1, 0.9)
#: the longest a round lasts by default, in seconds
ROUND_SECONDS = 60.0


def pair_run_ids(run_id: str) -> dict[bool, str]:
    """The run ids of a paired drain's two runs, by ledger mode (each has its own keys and queue)."""
    return {True: f"{run_id}.on", False: f"{run_id}.off"}


class _Drainer:
    """One worker process of a drain, started from the caller's environment with this run's id and
    ledger mode, and the count of the tasks it has executed."""

    def __init__(self, settings: Settings, client: redis.Redis, log_dir: Path, cpus: list[int] | None,
                 index: int = 0) -> None:
        self.settings = settings
        self._client = client
        self._ledger = Ledger(settings.prefix)
        self._done_key = f"{settings.prefix}done"
        mode = ("ledger" if settings.ledger else "noledger") + (f"-{index}" if index else "")
        self.proc = Managed(name=f"worker-{mode}", argv=[sys.executable, "-m", "taskbench", "worker"],
                            log_path=log_dir / f"drain-{settings.backend}-{mode}.log", cpus=cpus)
        self.cpus: list[int] = []

    def done(self) -> int:
        """Distinct tasks executed (the ledger's count), or executions counted (ledger off)."""
        if self.settings.ledger:
            return self._ledger.executed_count(self._client)
        return int(self._client.get(self._done_key) or 0)

    def start(self) -> None:
        self.proc.start({**os.environ, "TASKBENCH_RUN_ID": self.settings.run_id,
                         "TASKBENCH_LEDGER": str(self.settings.ledger).lower()})
        # the cores the worker may run on, as the kernel has them (the placement asked, or all)
        self.cpus = sorted(os.sched_getaffinity(self.proc.pid))

    def wait_ready(self, workers: int = 1) -> None:
        """Until ``workers`` workers of this run (this one among them) said they are ready."""
        try:
            wait_until(lambda: self._client.hlen(self.settings.ready_key) >= workers, 60, interval=0.005,
                       what="the worker to start", abort=self.exited)
        except WaitTimeoutError as exc:
            raise RuntimeError(f"{exc}: {self.proc.tail()}") from None

    def exited(self) -> str | None:
        return None if self.proc.alive() else f"the worker exited: {self.proc.tail()}"

    def cpu(self) -> float:
        return tree_cpu_seconds(self.proc.pid)

    def rss_mb(self) -> float:
        return tree_rss_mb(self.proc.pid)

    def stop(self) -> None:
        self.proc.stop(timeout=self.settings.shutdown_timeout + 5)


def _check_workload(workload: str, settings: Settings | None = None) -> None:
    """With the ledger off the worker counts only io/simple and noop; with it on, any workload runs
    (the ledger counts it), the user's own task too when the settings name one."""
    if workload in DRAIN_WORKLOADS:
        return
    if settings is not None and settings.ledger and (workload in WORKLOADS or
                                                     (workload == USER_TASK and settings.task)):
        return
    raise ValueError(f"a drain runs {' or '.join(DRAIN_WORKLOADS)} (with the ledger on, any built-in workload or "
                     f"your own task), not {workload!r}")


def measure(settings: Settings, tasks: int, log_dir: Path, seconds: float = ROUND_SECONDS, *,
            workload: str = "io/simple", worker_cpus: list[int] | None = None, workers: int = 1,
            payload: dict[str, Any] | None = None, broker_pids: tuple[int, ...] = ()) -> dict[str, Any]:
    """``workers`` worker processes drain ``tasks`` tasks enqueued beforehand, for at most ``seconds``:
    their rates, their CPU per task and their memory; with ``broker_pids``, the broker's CPU per task too.
    ``payload``: the template each of the user's tasks gets, its id filled in."""
    import redis

    _check_workload(workload, settings)
    enqueue_s = asyncio.run(_enqueue(settings, tasks, parallel=64, workload=workload, payload=payload))
    client = redis.Redis.from_url(settings.redis_url)
    drainers = [_Drainer(settings, client, log_dir, worker_cpus, index=i) for i in range(workers)]
    worker = drainers[0]  # the ledger's count is the run's: any worker reads it

    def exited() -> str | None:
        return next((why for d in drainers for why in [d.exited()] if why), None)

    def worker_cpu() -> float:
        return sum(d.cpu() for d in drainers)

    def broker_cpu() -> float:
        return sum(tree_cpu_seconds(pid) for pid in broker_pids)

    rss: list[float] = []
    try:
        for drainer in drainers:
            drainer.start()
        worker.wait_ready(workers)
        started = time.perf_counter()
        # the steady rate: from the 10 % mark to the 90 % mark, leaving out the worker's first
        # fetches and the last stragglers, which move a short drain's total time the most
        marks: dict[float, tuple[float, int]] = {}
        cpu: dict[float, float] = {}  # the workers' CPU seconds at each mark
        broker: dict[float, float] = {}  # the broker's

        def drained() -> bool:
            count = worker.done()
            now = time.perf_counter()
            for share in STEADY:
                if share not in marks and _reached(share, count, tasks, now - started, seconds):
                    marks[share] = (now, count)
                    cpu[share] = worker_cpu()
                    broker[share] = broker_cpu()
                    if share == STEADY[1]:  # the workers' memory once most tasks ran
                        rss.append(sum(d.rss_mb() for d in drainers))
            return count >= tasks or (now - started >= seconds and len(marks) == len(STEADY))

        wait_until(drained, seconds + 60, interval=0.005, raise_on_timeout=False, abort=exited)
        drain_s = time.perf_counter() - started
        count = worker.done()
        failed = sum(n for n, _ in Ledger(settings.prefix).outcomes(client).failed.values()) \
            if workload == USER_TASK else 0
    finally:
        for drainer in drainers:
            drainer.stop()
        client.close()
    return {
        "backend": settings.backend,
        "workload": workload,
        "ledger": settings.ledger,
        "tasks": tasks,
        "executed": count,
        "seconds": seconds,
        "enqueue_s": enqueue_s,
        "enqueue_per_s": tasks / enqueue_s,
        "drain_s": drain_s,
        "drain_per_s": count / drain_s if drain_s else None,
        "steady_per_s": _steady(marks),
        # the worker's CPU per task over the same interval: the ledger's cost as the worker pays it,
        # whether or not the worker's core was the bottleneck of the rate
        "worker_cpu_us_per_task": _cpu_per_task(marks, cpu),
        "broker_cpu_us_per_task": _cpu_per_task(marks, broker) if broker_pids else None,
        "worker_rss_mb": rss[0] if rss else None,
        "workers": workers,
        "failed": failed,
        "worker_cpus": worker.cpus,
    }


#: a moment of a paired drain: (perf_counter, count on, count off, CPU s on, CPU s off)
Snapshot = tuple[float, int, int, float, float]


def measure_pair(settings: Settings, tasks: int, log_dir: Path, seconds: float = ROUND_SECONDS, *,
                 workload: str = "io/simple", worker_cpus: list[int] | None = None,
                 first: bool = True) -> list[dict[str, Any]]:
    """Two runs of ``tasks`` tasks each (ids from :func:`pair_run_ids`), drained at once by two
    workers on the same cores for at most ``seconds``, the ledger on in one and off in the other;
    ``first``: the ledger mode whose worker is started first. Returns a row per worker (ledger on
    first); each row's ``steady_per_s`` and ``worker_cpu_us_per_task`` are taken over the *same*
    window: from the moment both workers have executed 10 % of their tasks to the moment the first
    reaches 90 % (or 10 % and 90 % of the seconds, when those come first)."""
    import redis

    _check_workload(workload)
    ids = pair_run_ids(settings.run_id)
    runs = {mode: settings.model_copy(update={"run_id": ids[mode], "ledger": mode}) for mode in (True, False)}
    enqueue_s = {mode: asyncio.run(_enqueue(runs[mode], tasks, parallel=64, workload=workload))
                 for mode in (True, False)}
    client = redis.Redis.from_url(settings.redis_url)
    workers = {mode: _Drainer(runs[mode], client, log_dir, worker_cpus) for mode in (True, False)}
    order = (first, not first)
    try:
        for mode in order:
            workers[mode].start()
        for mode in order:
            workers[mode].wait_ready()
        on, off = workers[True], workers[False]
        started = time.perf_counter()
        moments: dict[str, Snapshot] = {}
        finished: dict[bool, float] = {}

        def exited() -> str | None:
            return on.exited() or off.exited()

        def drained() -> bool:
            now = time.perf_counter()
            elapsed = now - started
            counts = {True: on.done(), False: off.done()}
            low, high = STEADY
            most, least = max(counts.values()), min(counts.values())
            for name, reached in (("first", _reached(low, most, tasks, elapsed, seconds)),
                                  ("both", _reached(low, least, tasks, elapsed, seconds)),
                                  ("end", _reached(high, most, tasks, elapsed, seconds))):
                if reached and name not in moments:
                    moments[name] = (now, counts[True], counts[False], on.cpu(), off.cpu())
            for mode, count in counts.items():
                if count >= tasks and mode not in finished:
                    finished[mode] = elapsed
            return len(finished) == 2 or (elapsed >= seconds and "end" in moments)

        wait_until(drained, seconds + 60, interval=0.005, raise_on_timeout=False, abort=exited)
        executed = {True: on.done(), False: off.done()}
    finally:
        for mode in order:
            workers[mode].stop()
        client.close()
    window = _window(moments)
    rows = []
    for mode in (True, False):
        drain_s = finished.get(mode, time.perf_counter() - started)
        rate, cpu_us = _window_rates(window, mode)
        rows.append({
            "backend": settings.backend,
            "workload": workload,
            "ledger": mode,
            "paired": True,
            "first": mode == first,
            "tasks": tasks,
            "executed": executed[mode],
            "seconds": seconds,
            "enqueue_s": enqueue_s[mode],
            "enqueue_per_s": tasks / enqueue_s[mode],
            "drain_s": drain_s,
            "drain_per_s": executed[mode] / drain_s if drain_s else None,
            "steady_per_s": rate,
            "worker_cpu_us_per_task": cpu_us,
            "window_s": None if window is None else window[1][0] - window[0][0],
            "worker_cpus": workers[mode].cpus,
        })
    return rows


def _reached(share: float, count: int, tasks: int, elapsed: float, seconds: float) -> bool:
    """Whether a drain that has run ``count`` of its ``tasks`` in ``elapsed`` of its ``seconds`` is at its
    ``share`` mark: that share of the tasks ran, or that share of the time passed with a task run."""
    return count >= share * tasks or (count > 0 and elapsed >= share * seconds)


def _window(moments: dict[str, Snapshot]) -> tuple[Snapshot, Snapshot] | None:
    """The interval both workers' rates are taken over: from both at 10 % (or, when one reached 90 %
    before the other reached 10 %, from the first at 10 %) to the first at 90 %; None without one."""
    if "end" not in moments:
        return None
    start = moments.get("both")
    if start is None or start[0] >= moments["end"][0]:
        start = moments.get("first")
    if start is None or start[0] >= moments["end"][0]:
        return None
    return start, moments["end"]


def _window_rates(window: tuple[Snapshot, Snapshot] | None, ledger: bool) -> tuple[float | None, float | None]:
    """A worker's tasks per second and CPU µs per task over the window (``ledger``: which worker)."""
    if window is None:
        return None, None
    (t0, on0, off0, cpu_on0, cpu_off0), (t1, on1, off1, cpu_on1, cpu_off1) = window
    tasks = on1 - on0 if ledger else off1 - off0
    spent = cpu_on1 - cpu_on0 if ledger else cpu_off1 - cpu_off0
    rate = tasks / (t1 - t0)
    return rate, (spent / tasks * 1e6 if tasks > 0 and spent >= 0 else None)


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
