"""The producer of a synchronous library in the async API: its blocking enqueue runs in a bounded thread pool.

The synchronous libraries (Celery's kombu, Dramatiq, the forking Redis queues) have no async enqueue:
called on the API's event loop, each enqueue would stop every other request for a broker round trip.
Each of them runs it here instead:

- in a pool of ``--producer-threads`` threads (``TASKBENCH_PRODUCER_THREADS``), created with the API and
  shut down with it; the library's own connection pool should hold as many connections (a thread that
  waits for a connection holds its slot all the same);
- bounded by ``--enqueue-timeout``: the API stops waiting at its deadline (503, outcome unknown), and a
  call still queued for a thread by then is dropped instead of started, so a saturated pool never sends a
  task the client was told might not exist; a call already running finishes (a thread cannot be
  cancelled), which is why :attr:`SyncProducer.timeout` is also meant for the library's socket timeout.
"""

from __future__ import annotations

import asyncio
import functools
import time
from collections.abc import AsyncIterator, Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, TypeVar

if TYPE_CHECKING:
    import redis

    from taskbench.settings import Settings

T = TypeVar("T")


class SyncProducer:
    """Runs one blocking call per enqueue on a bounded thread pool, within ``--enqueue-timeout``."""

    def __init__(self, settings: Settings, name: str) -> None:
        self.threads = settings.producer_threads
        #: seconds an enqueue may take, queueing for a thread included (``--enqueue-timeout``)
        self.timeout = settings.enqueue_timeout
        self._executor = ThreadPoolExecutor(self.threads, thread_name_prefix=f"taskbench-{name}-enqueue")

    async def run(self, call: Callable[[], T]) -> T:
        """``call()`` on a pool thread; a TimeoutError when it would start past the deadline."""
        deadline = time.monotonic() + self.timeout
        return await asyncio.get_running_loop().run_in_executor(
            self._executor, functools.partial(_within, call, deadline))

    def redis_pool(self, url: str) -> redis.BlockingConnectionPool:
        """A blocking redis-py pool for the producer's threads: a connection each, and no wait or read
        longer than an enqueue may take."""
        import redis

        return redis.BlockingConnectionPool.from_url(url, max_connections=self.threads, timeout=self.timeout,
                                                     socket_timeout=self.timeout)

    def close(self) -> None:
        """Wait for the calls already started; drop the queued ones (their requests have their answer)."""
        self._executor.shutdown(wait=True, cancel_futures=True)


def _within(call: Callable[[], T], deadline: float) -> T:
    if time.monotonic() > deadline:
        raise TimeoutError("no producer thread was free before the enqueue deadline")
    return call()


@asynccontextmanager
async def sync_producer(settings: Settings, name: str) -> AsyncIterator[SyncProducer]:
    """A :class:`SyncProducer` for the API process's lifetime."""
    pool = SyncProducer(settings, name)
    try:
        yield pool
    finally:
        pool.close()
