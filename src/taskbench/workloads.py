"""The seed's five task bodies, shared by every backend; each one ends by writing the ledger."""

from __future__ import annotations

import asyncio
import contextlib
import multiprocessing
import threading
import time
from collections.abc import Awaitable, Callable
from concurrent.futures import Executor, ProcessPoolExecutor, ThreadPoolExecutor
from types import TracebackType
from typing import TYPE_CHECKING, Any, Self

from taskbench.ledger.recording import Recorder
from taskbench.messages import NOOP, USER_TASK, WORKLOADS, TaskMessage
from taskbench.metrics import task_metrics
from taskbench.user_task import UserTask, payload_of

#: connections of the async pool kept out of the tasks' semaphore: /health's PING, the broker probe
RESERVED = 4

if TYPE_CHECKING:
    import redis
    import redis.asyncio as aioredis

    from taskbench.settings import Settings


def crunch(iterations: int) -> int:
    """CPU-bound work: a pure-Python loop, so it holds the GIL like real number crunching."""
    acc = 0
    for i in range(iterations):
        acc = (acc + i * i) % 1_000_003
    return acc


class Workloads:
    """Runs tasks in one process: owns that process's Redis clients, thread and process pools.

    The pools are created once, on first use, and shut down when the process's ``Workloads``
    closes (an async context manager), never per task.
    """

    def __init__(self, settings: Settings) -> None:
        import redis as redis_sync
        import redis.asyncio as aioredis

        self.settings = settings
        self.metrics = task_metrics(settings.backend)
        self.counter_key = f"{settings.prefix}counter"
        # Under a burst a task waits for a connection rather than failing with "Too many connections"
        # (redis-py's plain async pool raises when it has max_connections in use): the wait is a
        # semaphore of ours, free when uncontended, where redis-py's BlockingConnectionPool takes a
        # lock, a timeout and a condition per command. A few connections stay outside it for PING.
        connections = settings.redis_max_connections
        self.redis: aioredis.Redis = aioredis.Redis.from_url(settings.redis_url, max_connections=connections)
        self._slots = asyncio.Semaphore(connections - min(RESERVED, connections // 2))
        self.redis_sync: redis.Redis = redis_sync.Redis(
            connection_pool=redis_sync.BlockingConnectionPool.from_url(
                settings.redis_url, max_connections=settings.threads + 4, timeout=30
            )
        )
        # every execution's record goes through it, whichever way it takes (taskbench.ledger.recording)
        self.recorder = Recorder(settings, client=self.redis, sync_client=self.redis_sync, slots=self._slots,
                                 counter_key=self.counter_key, repeated=self._redelivered)
        self.ledger = self.recorder.ledger
        self._threads: ThreadPoolExecutor | None = None
        self._processes: ProcessPoolExecutor | None = None
        # a user's own task (settings.task: module:callable), imported once; TaskSpecError at start
        self.user_task = (UserTask(settings.task, settings.task_path or "", threads=settings.concurrency)
                          if settings.task else None)
        self._dispatch: dict[str, Callable[[TaskMessage, float], Awaitable[bool | None]]] = {
            "io/simple": self._io_simple,
            "io/sync": self._io_sync,
            "io/thread": self._io_thread,
            "cpu/simple": self._cpu_simple,
            "cpu/process": self._cpu_process,
            NOOP: self._noop,
            USER_TASK: self._user,
        }
        assert set(self._dispatch) == {*WORKLOADS, NOOP, USER_TASK}
        # ledger off: executions are counted here and flushed to ``done_key`` in batches
        self.done_key = f"{settings.prefix}done"
        self._done = 0
        self._flushed = 0
        self._done_lock = threading.Lock()
        self._flusher: asyncio.Task[None] | None = None

    async def __aenter__(self) -> Self:
        await self.redis.ping()
        await self.recorder.open()
        if not self.settings.ledger:
            self._flusher = asyncio.create_task(self._flush_loop())
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    async def close(self) -> None:
        if self._flusher is not None:
            self._flusher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._flusher
            self._flusher = None
            await self._flush()
        if self._threads is not None:
            self._threads.shutdown(wait=True, cancel_futures=True)
            self._threads = None
        if self.user_task is not None:
            self.user_task.close()
        if self._processes is not None:
            self._processes.shutdown(wait=True, cancel_futures=True)
            self._processes = None
        await self.recorder.aclose()
        await self.redis.aclose(close_connection_pool=True)
        self.redis_sync.close()
        self.redis_sync.connection_pool.disconnect()

    def _redelivered(self, workload: str) -> None:
        self.metrics.task(workload).redelivered.inc()

    def run_here(self, task: TaskMessage) -> bool:
        """Run ``task`` in the calling thread (a library's, once the backend said its tasks run there:
        :meth:`Recorder.tasks_run`) if its body needs no event loop: a no-op, or ``io/simple`` with no delay; its
        record (or, ledger off, its INCRBY) made from that thread (:meth:`Recorder.record_here`). False: not run,
        the caller hands it to the loop (:meth:`run`)."""
        recorder = self.recorder
        needs_loop = task.workload != NOOP and (task.workload != "io/simple" or bool(self.settings.io_delay))
        if not recorder.records_here or needs_loop:
            return False
        metrics = self.metrics.task(task.workload)
        metrics.started.inc()
        metrics.in_progress.inc()
        started = time.time()
        clock = time.perf_counter()
        incr = (self.counter_key, task.value) if task.workload == "io/simple" else None
        try:
            if self.settings.ledger:
                runs = recorder.record_here(task.task_id, task.enqueued_at, started, time.time(), incr=incr,
                                   workload=task.workload)
                if runs is not None and runs > 1:
                    metrics.redelivered.inc()
            else:
                if incr is not None:
                    recorder.incrby_here(*incr)
                self._count_done()
        except Exception:
            metrics.failed.inc()
            raise
        else:
            metrics.succeeded_at(task.enqueued_at, started, clock)
        finally:
            metrics.in_progress.dec()
        return True

    async def run(self, task: TaskMessage) -> None:
        """Execute one task and record it in the ledger."""
        try:
            body = self._dispatch[task.workload]
        except KeyError:
            raise ValueError(f"unknown workload {task.workload!r}; known: {WORKLOADS}") from None
        metrics = self.metrics.task(task.workload)
        metrics.started.inc()
        metrics.in_progress.inc()
        started = time.time()  # wall clock: compared with the API's enqueue time
        clock = time.perf_counter()
        try:
            returned = await body(task, started)
        except Exception:
            metrics.failed.inc()
            raise
        else:
            if returned is False:  # a user's task that raised: recorded in the ledger as failed
                metrics.failed.inc()
            else:
                metrics.succeeded_at(task.enqueued_at, started, clock)
        finally:
            metrics.in_progress.dec()

    # -- the five bodies ------------------------------------------------------------------

    async def _io_simple(self, task: TaskMessage, started: float) -> None:
        if self.settings.io_delay:
            await asyncio.sleep(self.settings.io_delay)
        await self._record(task, started, incr=True)

    async def _io_sync(self, task: TaskMessage, started: float) -> None:
        # Blocks the event loop on purpose: this is what a sync client in async code does.
        self._sync_body(task, started)

    async def _io_thread(self, task: TaskMessage, started: float) -> None:
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(self._thread_pool(), self._sync_body, task, started)

    async def _cpu_simple(self, task: TaskMessage, started: float) -> None:
        crunch(self.settings.cpu_iterations)
        await self._record(task, started, incr=True)

    async def _noop(self, task: TaskMessage, started: float) -> None:
        await self._record(task, started)

    async def _user(self, task: TaskMessage, started: float) -> bool:
        """The user's callable, then its record: False when the call raised (a failed execution)."""
        if self.user_task is None:
            raise ValueError("a user/task message, and this process has no task (TASKBENCH_TASK)")
        def began() -> Awaitable[Any]:  # a call that never ends leaves its start: indeterminate, not lost
            return self.recorder.record_start(task.task_id, time.time())

        cpu_s, error = await self.user_task.call(payload_of(task.payload, task.task_id),
                                                 began if self.settings.ledger else None)
        if not self.settings.ledger:
            self._count_done()
            return error is None
        runs = await self.recorder.record_outcome(task.task_id, task.enqueued_at, started, time.time(),
                                                  cpu_s=cpu_s, error=error)
        if runs > 1:
            self.metrics.task(task.workload).redelivered.inc()
        return error is None

    async def _cpu_process(self, task: TaskMessage, started: float) -> None:
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(self._process_pool(), crunch, self.settings.cpu_iterations)
        await self._record(task, started, incr=True)

    # -- helpers --------------------------------------------------------------------------

    def _sync_body(self, task: TaskMessage, started: float) -> None:
        if self.settings.io_delay:
            time.sleep(self.settings.io_delay)
        if not self.settings.ledger:
            self.redis_sync.incrby(self.counter_key, task.value)
            self._count_done()
            return
        runs = self.recorder.record_blocking(task.task_id, task.enqueued_at, started, time.time(),
                                             incr=(self.counter_key, task.value))
        if runs > 1:
            self.metrics.task(task.workload).redelivered.inc()

    async def _record(self, task: TaskMessage, started: float, *, incr: bool = False) -> None:
        """The ledger's record of the task; ``incr``: with the task's own INCRBY, in the same round trip."""
        if not self.settings.ledger:
            if incr:
                async with self._slots:
                    await self.redis.incrby(self.counter_key, task.value)
            self._count_done()
            return
        effect = (self.counter_key, task.value) if incr else None
        runs = await self.recorder.record(task.task_id, task.enqueued_at, started, time.time(), incr=effect,
                                          workload=task.workload)
        if runs is not None and runs > 1:
            self.metrics.task(task.workload).redelivered.inc()

    def _count_done(self) -> None:
        with self._done_lock:
            self._done += 1

    async def _flush(self) -> None:
        done = self._done
        if done > self._flushed:
            async with self._slots:
                await self.redis.incrby(self.done_key, done - self._flushed)
            self._flushed = done

    async def _flush_loop(self) -> None:
        while True:
            await asyncio.sleep(0.02)
            await self._flush()

    def _thread_pool(self) -> Executor:
        if self._threads is None:
            self._threads = ThreadPoolExecutor(
                max_workers=self.settings.threads, thread_name_prefix="taskbench-io"
            )
        return self._threads

    def _process_pool(self) -> Executor:
        if self._processes is None:
            # spawn, not fork: the parent runs an event loop and threads that must not be cloned
            self._processes = ProcessPoolExecutor(
                max_workers=self.settings.processes,
                mp_context=multiprocessing.get_context("spawn"),
            )
        return self._processes
