"""Procrastinate: a PostgreSQL jobs table, LISTEN/NOTIFY, worker heartbeats, the documented stalled-job retry."""

from __future__ import annotations

from typing import ClassVar

from pydantic import Field

from taskbench.backends.declaration import AT_MOST_ONCE, BackendInfo, Delivery
from taskbench.backends.options import LibraryOptions


class Options(LibraryOptions):
    retry_stalled: bool = Field(
        default=False,
        description="Procrastinate's documented stalled-job retry: a periodic task retries the jobs of workers "
                    "whose heartbeat is older than --task-timeout (at-least-once); off, the library's default, "
                    "a dead worker's jobs stay doing for good (at-most-once)")

    promise_fields: ClassVar[tuple[str, ...]] = ("retry_stalled",)


def _promise(_broker: str, options: Options) -> Delivery:
    if not options.retry_stalled:
        return Delivery(guarantee=AT_MOST_ONCE,
                        recovery="none (Procrastinate's default; --option procrastinate.retry_stalled=true adds the "
                                 "documented task): a dead worker's jobs stay doing for good",
                        source="procrastinate 3.10 docs, 'Retry stalled jobs' (procrastinate/manager.py "
                               "get_stalled_jobs runs only where the user schedules it)")
    return Delivery(recovery="the documented periodic task (every --task-timeout/4 s; --option "
                             "procrastinate.retry_stalled=true) retries the doing jobs of workers whose heartbeat "
                             "is older than --task-timeout: back within ~1.25 x --task-timeout + the 5 s fetch poll",
                    source="procrastinate 3.10 procrastinate/manager.py get_stalled_jobs, retry_job; "
                           "taskbench/backends/procrastinate/backend.py")


BACKENDS = (
    BackendInfo(
        name="procrastinate",
        port=8020,
        rank=90,
        summary="Procrastinate: PostgreSQL jobs table, LISTEN/NOTIFY, worker heartbeats, stalled-job retry "
                "as documented (opt-in)",
        brokers=("postgres",),
        options=Options,
        promise=_promise,
        prepares_broker=True,
    ),
)
