"""Records made in a forked child (a work horse, a process worker, Celery's prefork child): no event loop there.

Each record is one blocking script call on the child's own synchronous client (redis-py's pool sees the new pid
and opens the child's own connection). The script records the execution and does the task's INCRBY together,
so a child killed at any moment leaves both or neither. With the ledger off the child counts its execution in
``<prefix>done`` at once: a child that exits has no batch to flush.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from taskbench.ledger.core import Ledger

if TYPE_CHECKING:
    from taskbench.settings import Settings

__all__ = ["ChildRecorder"]


class ChildRecorder:
    """How a forked child records: made in the parent before it forks, used in the child."""

    def __init__(self, settings: Settings) -> None:
        import redis

        self.on = settings.ledger
        self.ledger = Ledger(settings.prefix)
        self.done_key = f"{settings.prefix}done"
        self.client = redis.Redis.from_url(settings.redis_url)

    def record(self, task_id: str, enqueued_at: float, started_at: float, finished_at: float, *,
               incr: tuple[str, int] | None = None) -> int:
        """Record one execution (and do the task's INCRBY with it); how many times the task has run."""
        if not self.on:
            with self.client.pipeline(transaction=False) as pipe:
                if incr:
                    pipe.incrby(*incr)
                pipe.incrby(self.done_key, 1)
                pipe.execute()
            return 1
        return self.ledger.record_sync(self.client, task_id, enqueued_at, started_at, finished_at, incr=incr)

    def record_start(self, task_id: str, started_at: float) -> None:
        """That a user's task started, before its call (nothing with the ledger off)."""
        if self.on:
            self.ledger.record_start_sync(self.client, task_id, started_at)

    def record_outcome(self, task_id: str, enqueued_at: float, started_at: float, finished_at: float, *,
                       cpu_s: float | None, error: str | None) -> int:
        """Record a user's task: its CPU time, and its error if the call raised."""
        if not self.on:
            self.client.incrby(self.done_key, 1)
            return 1
        return self.ledger.record_execution_sync(self.client, task_id, enqueued_at, started_at, finished_at,
                                                 cpu_s=cpu_s, error=error)
