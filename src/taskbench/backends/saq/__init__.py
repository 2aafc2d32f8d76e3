"""SAQ on Redis (``saq``) and on PostgreSQL (``saq-postgres``): one library, one set of settings."""

from __future__ import annotations

from typing import ClassVar, Final

from pydantic import Field

from taskbench.backends.declaration import AT_MOST_ONCE, BackendInfo, Delivery
from taskbench.backends.options import LibraryOptions
from taskbench.backends.shapes import Shape


class Options(LibraryOptions):
    retries: int = Field(default=1, ge=1, le=100,
                         description="SAQ's job retries, the first attempt included: 1 (SAQ's default) leaves a dead "
                                     "worker's job aborted, never run again (at-most-once); 2 or more re-queue it "
                                     "after its heartbeat (--task-timeout) passed (at-least-once)")

    promise_fields: ClassVar[tuple[str, ...]] = ("retries",)


_SOURCE: Final = ("saq 0.26 saq/queue/redis.py RedisQueue.sweep, saq/queue/postgres.py PostgresQueue.sweep "
                  "(abort; re-queued only while attempts < retries)")


def _promise(_broker: str, options: Options) -> Delivery:
    if options.retries <= 1:
        return Delivery(guarantee=AT_MOST_ONCE,
                        recovery="retries=1 (SAQ's default; --option saq.retries=N): a worker's sweep aborts an "
                                 "active job whose heartbeat (--task-timeout) passed and never runs it again",
                        source=_SOURCE)
    return Delivery(recovery=f"a worker's sweep aborts and re-queues an active job whose heartbeat (--task-timeout) "
                             f"passed, up to retries={options.retries} attempts (--option saq.retries; SAQ's "
                             f"default 1 re-runs none)",
                    source=f"{_SOURCE}; taskbench/backends/saq/backend.py (a job that never started goes back to "
                           f"queued)")


BACKENDS = (
    BackendInfo(
        name="saq",
        time_limit="SAQ's job timeout",
        port=8003,
        rank=20,
        summary="SAQ: asyncio worker on Redis lists (BLMOVE), JSON, sweeps and retries stuck jobs",
        key_patterns=("saq:taskbench:{run_id}:*", "saq:job:taskbench:{run_id}:*", "saq:abort:{run_id}:*"),
        dashboard="SAQ web",
        options=Options,
        promise=_promise,
    ),
    BackendInfo(
        name="saq-postgres",
        time_limit="SAQ's job timeout",
        port=8022,
        rank=110,
        summary="SAQ on PostgreSQL: SAQ's PostgresQueue (SKIP LOCKED dequeue, LISTEN/NOTIFY), JSON",
        brokers=("postgres",),
        prepares_broker=True,
        options=Options,
        promise=_promise,
        variant="postgres",
    ),
)

#: this library's runs in the published no-op benchmarks (taskbench parity)
SHAPES = (
    Shape("saq", 20_000, 32, "gather", "burst", "benchmarks/bench_saq.py; `saq --quiet bench_saq.settings`",
          parallel=32, options={"dequeue_timeout": "1"}, published_s=9.86, source="streaq"),
    Shape("saq", 1_000, 10, "gather", "poll", "benchmarks/simple.py bench_saq", parallel=20, published_s=0.40511,
          source="saq"),
)
