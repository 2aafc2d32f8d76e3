"""RQ: forking workers on Redis, without (``rq``) and with ``Retry`` (``rq-retry``): one library, one set of
settings."""

from __future__ import annotations

from typing import Any, ClassVar, Final

from pydantic import Field

from taskbench.backends.declaration import AT_MOST_ONCE, BackendInfo, Delivery
from taskbench.backends.options import LibraryOptions
from taskbench.backends.shapes import Shape


class Options(LibraryOptions):
    worker_ttl: int = Field(
        default=420, ge=16, le=86_400,
        description="RQ's worker_ttl (RQ's default 420): an idle worker's blocking dequeue returns, and may run "
                    "the maintenance that handles abandoned jobs, every worker_ttl - 15 s")
    maintenance_interval: int = Field(
        default=600, ge=1, le=86_400,
        description="RQ's maintenance_interval (RQ's default 600): seconds between two cleanups of the "
                    "registries, which move a dead worker's expired job to the failed registry (rq) or re-queue "
                    "it (rq-retry)")

    promise_fields: ClassVar[tuple[str, ...]] = ("worker_ttl", "maintenance_interval")
    #: an idle worker's dequeue returns every 2 s and runs the maintenance every 2 s
    quick_recovery: ClassVar[dict[str, Any]] = {"worker_ttl": 17, "maintenance_interval": 2}


#: RQ's heartbeat TTL of a running job at most: ``min(job timeout, job_monitoring_interval=30) + 60`` s
HEARTBEAT_TTL: Final = 90


def _wait(options: Options) -> str:
    ttl, interval = options.worker_ttl, options.maintenance_interval
    return (f"its heartbeat TTL (min(--task-timeout, 30) + 60 s) expired, at the next maintenance of a worker "
            f"(maintenance_interval {interval:g} s, --option rq.maintenance_interval; an idle worker checks every "
            f"worker_ttl - 15 = {ttl - 15:g} s, --option rq.worker_ttl)")


_SOURCE: Final = ("rq 3.0 rq/registry.py StartedJobRegistry.cleanup (AbandonedJobError), rq/worker/base.py "
                     "handle_job_failure; rq/intermediate_queue.py IntermediateQueue.cleanup (a job between its "
                     "BLMOVE and the started registry: failed, or retried, after 1 min)")


def _promise(_broker: str, options: Options) -> Delivery:
    return Delivery(guarantee=AT_MOST_ONCE,
                    recovery=f"no Retry (RQ's default): a dead worker's job is moved to the failed registry "
                             f"(AbandonedJobError) once {_wait(options)}; never run again",
                    source=_SOURCE)


#: RQ's IntermediateQueue.should_be_cleaned_up: a job first seen outside the started registry is cleaned
#: up at a maintenance more than this many seconds later
INTERMEDIATE_AGE: Final = 60


def retry_after(options: Options) -> float:
    """Seconds after a kill by which RQ with Retry has enqueued every job of the dead worker again.

    A job the worker had started is abandoned at the first maintenance after its heartbeat TTL (at most
    ``maintenance_interval`` + one idle dequeue, ``worker_ttl - 15``, apart). A job it had taken off the
    queue (BLMOVE into the intermediate queue, already in the started registry) but not yet marked started
    takes two maintenances more: the started registry's cleanup skips it (its status is still ``queued``)
    and drops its entry, the intermediate queue's cleanup at that same maintenance only notes it as first
    seen, and a maintenance more than 60 s later retries it (measured with RQ's defaults: 6 of a killed
    pool's 10 jobs were such, and came back after the third maintenance, past the 1095 s the started
    jobs alone need)."""
    interval, dequeue = float(options.maintenance_interval), float(options.worker_ttl) - 15
    return HEARTBEAT_TTL + interval + dequeue + max(INTERMEDIATE_AGE, interval) + dequeue


def _retry_promise(_broker: str, options: Options) -> Delivery:
    after = retry_after(options)
    return Delivery(after=after,
                    recovery=f"Retry(max=3): a dead worker's job is enqueued again once {_wait(options)}; "
                             f"a job it had taken off the queue but not started, two maintenances later (RQ's "
                             f"intermediate queue: first seen, then retried over {INTERMEDIATE_AGE} s on): "
                             f"back within {after:g} s",
                    source=f"{_SOURCE}; rq/job.py Retry")


BACKENDS = (
    BackendInfo(
        name="rq",
        time_limit="RQ's job_timeout",
        port=8023,
        rank=120,
        summary="RQ: Queue.enqueue with the task id as a unique job id, a pool of forking workers, JSON",
        remembers_ids=True,
        threading="forked",
        options=Options,
        promise=_promise,
    ),
    BackendInfo(
        name="rq-retry",
        time_limit="RQ's job_timeout",
        port=8024,
        rank=130,
        summary="RQ with Retry(max=3): an abandoned job is enqueued again instead of failed",
        remembers_ids=True,
        threading="forked",
        options=Options,
        promise=_retry_promise,
        variant="retry",
    ),
)

#: this library's runs in the published no-op benchmarks (taskbench parity)
SHAPES = (
    Shape("rq", 1_000, 1, "serial", "burst", "benchmarks/simple.py bench_rq", published_s=15.0959,
          note="the published RQ time also counts the enqueue (its clock is not reset); here the drain only",
          source="saq"),
    Shape("rq", 20_000, 10, "serial", "last-finish", "rq/; `rq worker-pool -n 10`", published_s=51.05,
          source="python_queue_benchmark"),
)
