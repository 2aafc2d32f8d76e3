"""The one seam through which a process records its executions: :class:`Recorder`.

The workloads call it for every execution. The way inside follows where the backend's library runs its tasks
(:class:`Threading`), the same for every backend that runs them there, never tuned backend by backend:

* **On the event loop** (:attr:`Threading.LOOP`: arq, SAQ, Taskiq, ...). Each record is sent by the loop's writer
  (:mod:`taskbench.ledger.writer`: a connection of its own, a group commit) and awaited before the task returns.
  In a worker the harness started (``TASKBENCH_LEDGER_SPOOL``) whose ledger Redis is not its broker, it is stored
  in a slot of a spool file instead (:mod:`.spool`): the library acknowledges to another server, and a slot stored
  before the task returned outlives a killed worker (the harness forwards it). A Redis that is both: awaited.
* **In the library's threads** (:attr:`Threading.THREADS`: Celery's threads pool, Dramatiq, a consumer's thread
  workers). A body that needs no loop runs and records in the calling thread (:meth:`Recorder.record_here`,
  :mod:`.threads`), and the loop's
  batches leave at once. Where waiting for the reply protects nothing (a library that acknowledges nothing once a
  task returns, or a ledger Redis apart from the broker: :func:`ledger_apart`) the reply is read later, or, in a
  worker the harness started, the record is spooled. The loop's records of such a worker as above.
* **In forked children** (:attr:`Threading.FORKED`: work horses, process workers, Celery's prefork pool). Each child
  records with one blocking script call on its own client (:meth:`taskbench.ledger.core.Ledger.record_sync`); the
  parent records nothing and spools nothing.

``TASKBENCH_LEDGER_SPOOL_LOOP=on|off`` (``Settings.ledger_spool_loop``) is a user's override of the loop's spool.
"""

from __future__ import annotations

import asyncio
import enum
import logging
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from taskbench.ledger.core import Ledger
from taskbench.ledger.pipe import same_redis
from taskbench.ledger.recording.spool import SpoolRecords, spool_records
from taskbench.ledger.recording.threads import thread_records_for
from taskbench.ledger.writer import writer_for

if TYPE_CHECKING:
    import redis
    import redis.asyncio as aioredis

    from taskbench.settings import Settings

log = logging.getLogger("taskbench.ledger")


class Threading(enum.Enum):
    """Where a backend's library runs its tasks: what decides how their records are made."""

    LOOP = "loop"
    THREADS = "threads"
    FORKED = "forked"


class _RecordsHere(Protocol):
    """Records made in the calling thread: a blocking round trip each, replies read later, or spool slots."""

    def record(self, task_id: str, enqueued_at: float, started_at: float, finished_at: float, *,
               incr: tuple[str, int] | None = None, workload: str = "") -> int | None: ...

    def incrby(self, key: str, amount: int) -> None: ...

    def close(self) -> None: ...


def ledger_apart(settings: Settings) -> bool:
    """Whether the ledger's Redis is a server other than the library's broker. Then what the library does once
    a task returns (its acknowledgement, to its broker) cannot meet the record on the way: a record written
    before the task returned is in the kernel (a killed worker cannot take it back) and reaches a server that
    no broker fault touches; only that server's own failure could lose it, which would lose records that had
    been answered too (the ledger's Redis that taskbench starts keeps nothing on disk: ``appendonly no``).
    A broker without its URL has nothing to compare: not apart."""
    try:
        return not same_redis(settings.redis_url, settings.broker_address)
    except ValueError:
        return False


class Recorder:
    """How one process records its executions (see the module's docstring); opened and closed with the process's
    :class:`taskbench.workloads.Workloads`. ``repeated(workload)`` is called for a record whose count went above
    one and that was not answered at once (the caller counts the others from what :meth:`record` returns)."""

    def __init__(self, settings: Settings, *, client: aioredis.Redis, sync_client: redis.Redis,
                 slots: asyncio.Semaphore, counter_key: str, repeated: Callable[[str], None]) -> None:
        self.settings = settings
        self.ledger = Ledger(settings.prefix)
        self._client = client
        self._sync_client = sync_client
        self._slots = slots  # the async pool's connections for tasks (redis-py's path only)
        self._counter_key = counter_key
        self._repeated = repeated
        # on a connection of their own, pipelined (None: a URL it does not speak, redis-py's then)
        self._writer = writer_for(self.ledger, settings.redis_url, concurrency=settings.concurrency) \
            if settings.ledger else None
        self._loop_spool: SpoolRecords | None = None
        self._here: _RecordsHere | None = None
        self.threading: Threading | None = None  # None: not a worker (the API's own tasks): awaited

    async def open(self) -> None:
        if self._writer is not None:
            await self._writer.__aenter__()

    async def aclose(self) -> None:
        """Once no task runs any more: every record made is sent (or left in a spool file for the harness)."""
        if self._writer is not None:
            await self._writer.aclose()
        if self._here is not None:
            self._here.close()
        if self._loop_spool is not None:
            self._loop_spool.close()

    def tasks_run(self, threading: Threading, *, acknowledges: bool = True) -> None:
        """Say where this worker's library runs its tasks, before the first one. ``acknowledges``: the library
        acknowledges a task once it returned (False: a library that takes it off its queue before it runs it)."""
        self.threading = threading
        if threading is Threading.THREADS:
            self._from_threads(confirm_later=not acknowledges or ledger_apart(self.settings))
        if threading is not Threading.FORKED:
            self._spool_loop()

    def _from_threads(self, *, confirm_later: bool) -> None:
        if self._writer is not None:
            self._writer.set_hold(0)  # no other task on the loop to wait for: a batch leaves at once
        if self._here is not None:
            return
        settings = self.settings
        here = thread_records_for(self.ledger, settings.redis_url, confirm_later=confirm_later,
                                  repeated=self._repeated)
        if here is not None and confirm_later and settings.ledger and settings.ledger_spool:
            self._here = spool_records(self.ledger, settings.redis_url, self._counter_key, settings.ledger_spool,
                                       fallback=here, repeated=self._repeated)
        else:
            self._here = here

    def _spool_loop(self) -> None:
        settings = self.settings
        if (self._loop_spool is not None or not settings.ledger or not settings.ledger_spool
                or settings.ledger_spool_loop == "off" or not ledger_apart(settings)):
            return
        try:
            self._loop_spool = SpoolRecords(self.ledger, settings.redis_url, self._counter_key,
                                            Path(settings.ledger_spool), repeated=self._repeated)
        except OSError as exc:
            log.warning("ledger spool: cannot write in %s (%r): the loop's records are awaited",
                        settings.ledger_spool, exc)

    @property
    def records_here(self) -> bool:
        """Whether a library's thread records its tasks itself (:meth:`record_here`)."""
        return self._here is not None

    async def record(self, task_id: str, enqueued_at: float, started_at: float, finished_at: float, *,
                     incr: tuple[str, int] | None = None, workload: str = "") -> int | None:
        """Record one execution from the loop (``incr``: the task's own INCRBY, in the same script): how many times
        the task has run, this one included, or None when that is read later (spooled)."""
        spool = self._loop_spool
        if spool is not None and spool.store(task_id, enqueued_at, started_at, finished_at, incr=incr,
                                             workload=workload):
            return None
        if self._writer is not None:
            return await self._writer.record(task_id, enqueued_at, started_at, finished_at, incr=incr)
        async with self._slots:
            return await self.ledger.record(self._client, task_id, enqueued_at, started_at, finished_at, incr=incr)

    def record_start(self, task_id: str, started_at: float) -> Awaitable[Any]:
        """That a user's task started, sent now without waiting (its call runs meanwhile): what to await for its
        reply. On the records' connection when there is one, one more command in their batch."""
        if self._writer is not None:
            return self._writer.submit(*self.ledger.start_command(task_id, started_at))
        return asyncio.ensure_future(self._start_apart(task_id, started_at))

    async def _start_apart(self, task_id: str, started_at: float) -> None:
        async with self._slots:
            await self.ledger.record_start(self._client, task_id, started_at)

    async def record_outcome(self, task_id: str, enqueued_at: float, started_at: float, finished_at: float, *,
                             cpu_s: float | None, error: str | None) -> int:
        """Record one execution of a user's task from the loop, with its CPU time and its exception type."""
        async with self._slots:
            return await self.ledger.record_execution(self._client, task_id, enqueued_at, started_at, finished_at,
                                                      cpu_s=cpu_s, error=error)

    def record_here(self, task_id: str, enqueued_at: float, started_at: float, finished_at: float, *,
                    incr: tuple[str, int] | None = None, workload: str = "") -> int | None:
        """Record one execution from a library's thread (only where :attr:`records_here`): as :meth:`record`."""
        if self._here is None:
            raise RuntimeError("no records from threads: the backend did not say its library runs tasks in them")
        return self._here.record(task_id, enqueued_at, started_at, finished_at, incr=incr, workload=workload)

    def incrby_here(self, key: str, amount: int) -> None:
        """A task's own INCRBY with the ledger off, from a library's thread (as :meth:`record_here`)."""
        if self._here is None:
            raise RuntimeError("no records from threads: the backend did not say its library runs tasks in them")
        self._here.incrby(key, amount)

    def record_blocking(self, task_id: str, enqueued_at: float, started_at: float, finished_at: float, *,
                        incr: tuple[str, int] | None = None) -> int:
        """Record one execution with a blocking call on the process's synchronous client: a body that blocks on
        purpose (``io/sync`` on the loop, ``io/thread`` in a pool thread), whose record is its own Redis call."""
        return self.ledger.record_sync(self._sync_client, task_id, enqueued_at, started_at, finished_at, incr=incr)
