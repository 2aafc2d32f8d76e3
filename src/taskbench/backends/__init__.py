"""Backend registry: a backend's name maps to its module and the extra that installs it.

The harness runs in its own environment and never imports a backend's library; what it must know of
a backend (durability, worker processes, delivery guarantee, brokers, keys it creates) is here.
"""

from __future__ import annotations

import importlib
import importlib.util
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import cache
from typing import TYPE_CHECKING, Any, Final

from taskbench.backends import bounds as _bounds
from taskbench.backends.bounds import Bound

if TYPE_CHECKING:
    from taskbench.backends.base import Backend


AT_LEAST_ONCE: Final = "at-least-once"
AT_MOST_ONCE: Final = "at-most-once"


@dataclass(frozen=True, kw_only=True)
class Delivery:
    """What a backend on one broker promises across a worker's death, as taskbench configures it: the
    rule a fault case is judged by (``taskbench backends``, docs/backends.md, every fault result)."""

    #: ``at-least-once``: a dead worker's task runs again (a loss fails the case, a duplicate is a figure);
    #: ``at-most-once``: it may be lost, never run twice (a duplicate fails the case, a loss is a figure)
    guarantee: str = AT_LEAST_ONCE
    #: how a dead worker's task comes back, or why it does not: the mechanism and its wait
    recovery: str = ""
    #: seconds before a dead worker's task comes back, when a setting of the library's own sets it rather
    #: than ``--task-timeout`` (the drain waits that long for it)
    after: float | None = None
    #: where the recovery (or its absence) is in the library's source, or its documentation
    source: str = ""
    #: the known windows of the guarantee under each fault (:mod:`taskbench.backends.bounds`)
    bounds: tuple[Bound, ...] = ()

    def __post_init__(self) -> None:
        if self.guarantee not in (AT_LEAST_ONCE, AT_MOST_ONCE):
            raise ValueError(f"unknown delivery guarantee {self.guarantee!r}")

    def all_bounds(self) -> tuple[Bound, ...]:
        """The guarantee as a bound (at-least-once allows duplicates, at-most-once losses), then the
        windows: the whole promise in the form a verdict reads."""
        if self.guarantee == AT_LEAST_ONCE:
            own = Bound(figure=_bounds.DUPLICATED, source=self.source or "docs/backends.md",
                        text="duplicates allowed (at-least-once): a task whose worker died after it ran and "
                             "before its ack runs again")
        else:
            own = Bound(figure=_bounds.LOST, source=self.source or "docs/backends.md",
                        text="losses allowed (at-most-once): a dead worker's task is not run again")
        return (own, *self.bounds)


#: the promise of a backend whose library has a setting that changes it: the broker and the settings'
#: values (every name of ``BackendInfo.promise_settings``) -> what it promises
Promise = Callable[[str, Mapping[str, Any]], Delivery]


@dataclass(frozen=True, kw_only=True)
class BackendInfo:
    """What the harness knows of a backend without importing its library."""

    name: str
    summary: str
    #: a 2xx from the API means a broker holds the task (it survives the API process)
    durable: bool = True
    #: tasks run in separate worker processes
    has_worker: bool = True
    #: brokers the backend can use; the first is the default
    brokers: tuple[str, ...] = ("redis",)
    #: broker -> what the backend promises there across a worker's death; a broker not named here:
    #: ``default_delivery``
    delivery: Mapping[str, Delivery] = field(default_factory=dict)
    default_delivery: Delivery = Delivery()
    #: the library settings (parameters of the same names in ``taskbench.params``, whose defaults are the
    #: library's) that change the promise, and the promise under their values: when set, it replaces
    #: ``delivery`` and ``default_delivery``
    promise_settings: tuple[str, ...] = ()
    promise: Promise | None = None
    #: Redis key patterns outside the run prefix that the library creates; ``{run_id}`` is filled
    key_patterns: tuple[str, ...] = ()
    #: the library's own web dashboard, run by ``taskbench dashboard`` (``taskbench up`` starts it)
    dashboard: str | None = None
    #: with ``idempotency`` on, the library refuses a known task id for the whole run by itself (the
    #: producer raises DuplicateTask), so an awaited enqueue needs no claim of the API's
    remembers_ids: bool = False
    #: non-empty: why this wiring is unsafe for a task queue. An unsafe backend reproduces a seed's
    #: mistake so that its cost is measured: never a default (``--backends all`` leaves it out), marked
    #: in ``taskbench backends`` and in every result; the lost and duplicated tasks it causes are the
    #: case's figures, not its failure
    unsafe: str = ""
    #: every worker process gets every task (a broadcast): the drain waits until the executions stop
    #: coming instead of until each task ran once
    fans_out: bool = False
    #: the backend prepares its broker once per run (``PreparesBroker``: a PostgreSQL queue's schema)
    prepares_broker: bool = False
    #: the ledger's records made on the worker's loop go to the harness's spool rather than being awaited
    #: (``Workloads.spool_loop_records``): the backend's default, from paired and sequential no-op drains
    #: with and without it (docs/benchmarks.md, "The loop's spool, backend by backend");
    #: ``TASKBENCH_LEDGER_SPOOL_LOOP=on|off`` overrides it
    loop_spool: bool = True
    #: the module under ``taskbench.backends`` and the extra, when not the name (a variant of a backend)
    module_name: str | None = None
    extra_name: str | None = None

    @property
    def module(self) -> str:
        return f"taskbench.backends.{self.module_name or self.name}"

    @property
    def extra(self) -> str:
        return self.extra_name or self.name

    def delivery_on(self, broker: str, settings: Mapping[str, Any] | None = None) -> Delivery:
        """What the backend promises on ``broker`` across a worker's death, under ``settings`` (a run's
        values of ``promise_settings``; a name left out: the library's default, the parameter's)."""
        if self.promise is None:
            return self.delivery.get(broker, self.default_delivery)
        from taskbench import params

        given = settings or {}
        return self.promise(broker, {name: given.get(name, params.default(name)) for name in self.promise_settings})

    @property
    def redelivers(self) -> bool:
        """A task whose worker died mid-task runs again, on the backend's default broker."""
        return self.has_worker and self.delivery_on(self.brokers[0]).guarantee == AT_LEAST_ONCE

    @property
    def implemented(self) -> bool:
        return _module_exists(self.module)

    def owned_key_patterns(self, run_id: str) -> list[str]:
        return [p.format(run_id=run_id) for p in self.key_patterns]


_SAQ_SOURCE: Final = ("saq 0.26 saq/queue/redis.py RedisQueue.sweep, saq/queue/postgres.py PostgresQueue.sweep "
                      "(abort; re-queued only while attempts < retries)")


def _saq_promise(_broker: str, settings: Mapping[str, Any]) -> Delivery:
    retries = settings["saq_retries"]
    if retries <= 1:
        return Delivery(guarantee=AT_MOST_ONCE,
                        recovery="retries=1 (SAQ's default; --saq-retries): a worker's sweep aborts an active job "
                                 "whose heartbeat (--task-timeout) passed and never runs it again",
                        source=_SAQ_SOURCE)
    return Delivery(recovery=f"a worker's sweep aborts and re-queues an active job whose heartbeat (--task-timeout) "
                             f"passed, up to retries={retries} attempts (--saq-retries; SAQ's default 1 re-runs none)",
                    source=f"{_SAQ_SOURCE}; taskbench/backends/saq.py (a job that never started goes back to queued)")


def _procrastinate_promise(_broker: str, settings: Mapping[str, Any]) -> Delivery:
    if not settings["procrastinate_retry_stalled"]:
        return Delivery(guarantee=AT_MOST_ONCE,
                        recovery="none (Procrastinate's default; --procrastinate-retry-stalled adds the documented "
                                 "task): a dead worker's jobs stay doing for good",
                        source="procrastinate 3.10 docs, 'Retry stalled jobs' (procrastinate/manager.py "
                               "get_stalled_jobs runs only where the user schedules it)")
    return Delivery(recovery="the documented periodic task (every --task-timeout/4 s; --procrastinate-retry-stalled) "
                             "retries the doing jobs of workers whose heartbeat is older than --task-timeout: back "
                             "within ~1.25 x --task-timeout + the 5 s fetch poll",
                    source="procrastinate 3.10 procrastinate/manager.py get_stalled_jobs, retry_job; "
                           "taskbench/backends/procrastinate.py")


#: RQ's heartbeat TTL of a running job at most: ``min(job timeout, job_monitoring_interval=30) + 60`` s
RQ_HEARTBEAT_TTL: Final = 90


def _rq_wait(settings: Mapping[str, Any]) -> str:
    ttl, interval = settings["rq_worker_ttl"], settings["rq_maintenance_interval"]
    return (f"its heartbeat TTL (min(--task-timeout, 30) + 60 s) expired, at the next maintenance of a worker "
            f"(maintenance_interval {interval:g} s, --rq-maintenance-interval; an idle worker checks every "
            f"worker_ttl - 15 = {ttl - 15:g} s, --rq-worker-ttl)")


_RQ_SOURCE: Final = ("rq 3.0 rq/registry.py StartedJobRegistry.cleanup (AbandonedJobError), rq/worker/base.py "
                     "handle_job_failure; rq/intermediate_queue.py IntermediateQueue.cleanup (a job between its "
                     "BLMOVE and the started registry: failed, or retried, after 1 min)")


def _rq_promise(_broker: str, settings: Mapping[str, Any]) -> Delivery:
    return Delivery(guarantee=AT_MOST_ONCE,
                    recovery=f"no Retry (RQ's default): a dead worker's job is moved to the failed registry "
                             f"(AbandonedJobError) once {_rq_wait(settings)}; never run again",
                    source=_RQ_SOURCE)


#: RQ's IntermediateQueue.should_be_cleaned_up: a job first seen outside the started registry is cleaned
#: up at a maintenance more than this many seconds later
RQ_INTERMEDIATE_AGE: Final = 60


def rq_retry_after(settings: Mapping[str, Any]) -> float:
    """Seconds after a kill by which RQ with Retry has enqueued every job of the dead worker again.

    A job the worker had started is abandoned at the first maintenance after its heartbeat TTL (at most
    ``maintenance_interval`` + one idle dequeue, ``worker_ttl - 15``, apart). A job it had taken off the
    queue (BLMOVE into the intermediate queue, already in the started registry) but not yet marked started
    takes two maintenances more: the started registry's cleanup skips it (its status is still ``queued``)
    and drops its entry, the intermediate queue's cleanup at that same maintenance only notes it as first
    seen, and a maintenance more than 60 s later retries it (measured with RQ's defaults: 6 of a killed
    pool's 10 jobs were such, and came back after the third maintenance, past the 1095 s the started
    jobs alone need)."""
    interval, dequeue = float(settings["rq_maintenance_interval"]), float(settings["rq_worker_ttl"]) - 15
    return RQ_HEARTBEAT_TTL + interval + dequeue + max(RQ_INTERMEDIATE_AGE, interval) + dequeue


def _rq_retry_promise(_broker: str, settings: Mapping[str, Any]) -> Delivery:
    after = rq_retry_after(settings)
    return Delivery(after=after,
                    recovery=f"Retry(max=3): a dead worker's job is enqueued again once {_rq_wait(settings)}; "
                             f"a job it had taken off the queue but not started, two maintenances later (RQ's "
                             f"intermediate queue: first seen, then retried over {RQ_INTERMEDIATE_AGE} s on): "
                             f"back within {after:g} s",
                    source=f"{_RQ_SOURCE}; rq/job.py Retry")


#: an AMQP queue's unacknowledged deliveries go back to the queue when their channel closes
_AMQP_REQUEUE: Final = ("RabbitMQ docs, Consumer Acknowledgements (unacked deliveries are requeued when their "
                        "channel closes); the ack after the task")


REGISTRY: Final[dict[str, BackendInfo]] = {
    info.name: info
    for info in (
        BackendInfo(
            name="background",
            summary="FastAPI BackgroundTasks: runs in the API process after the response, no queue",
            durable=False,
            has_worker=False,
            default_delivery=Delivery(guarantee=AT_MOST_ONCE,
                                      recovery="none: a task lives in the API process until it ran",
                                      source="taskbench/backends/background.py (Starlette's BackgroundTasks)"),
        ),
        BackendInfo(
            name="arq",
            summary="ARQ: asyncio worker polling a Redis sorted set, msgpack serialization",
            key_patterns=("arq:*:{run_id}:*",),
            remembers_ids=True,
            default_delivery=Delivery(recovery="the job's in-progress key expires: re-run after the job timeout "
                                               "(--task-timeout) + 10 s",
                                      source="arq 0.28 arq/worker.py Worker.start_jobs (the in-progress key, "
                                             "its expiry: the job timeout + 10 s)"),
        ),
        BackendInfo(
            name="saq",
            summary="SAQ: asyncio worker on Redis lists (BLMOVE), JSON, sweeps and retries stuck jobs",
            key_patterns=("saq:taskbench:{run_id}:*", "saq:job:taskbench:{run_id}:*", "saq:abort:{run_id}:*"),
            dashboard="SAQ web",
            promise_settings=("saq_retries",),
            promise=_saq_promise,
        ),
        BackendInfo(
            name="faststream",
            summary="FastStream: competing consumers (Redis stream group, RabbitMQ quorum queue, NATS JetStream)",
            brokers=("redis", "rabbitmq", "nats"),
            delivery={
                "redis": Delivery(recovery="stream consumer group with manual ack: a pending message is claimed "
                                           "by another consumer after --task-timeout",
                                  source="faststream 0.7 faststream/redis/subscriber/usecases/stream_subscriber.py "
                                         "(XAUTOCLAIM, min_idle_time); taskbench/backends/faststream.py",
                                  bounds=_bounds.FASTSTREAM_REDIS),
                "rabbitmq": Delivery(recovery="quorum queue, ack after the handler: requeued when the dead "
                                              "worker's connection closes",
                                     source=_AMQP_REQUEUE),
                "nats": Delivery(recovery="JetStream ack_wait: redelivered after --task-timeout",
                                 source="NATS docs, JetStream consumers: AckWait (an unacknowledged message is "
                                        "redelivered)"),
            },
        ),
        BackendInfo(
            name="faststream-pubsub",
            summary="UNSAFE seed wiring (seed 000): FastStream on Redis pub/sub; every worker runs every task, "
                    "a task sent while no worker listens is lost",
            durable=False,  # PUBLISH keeps nothing: the 2xx says only that the API published
            unsafe="Redis pub/sub broadcasts: with N workers each task runs N times, and a message published "
                   "while no worker is subscribed is dropped (no queue, no ack, no redelivery)",
            fans_out=True,
            module_name="faststream_pubsub",
            extra_name="faststream",
            default_delivery=Delivery(guarantee=AT_MOST_ONCE, recovery="none: pub/sub keeps nothing",
                                      source="Redis docs, Pub/Sub: at-most-once message delivery"),
        ),
        BackendInfo(
            name="celery",
            summary="Celery: late acks, threads pool beside one event loop per worker process, JSON",
            dashboard="Flower",
            brokers=("redis", "rabbitmq"),
            delivery={
                "redis": Delivery(recovery="late ack: kombu restores the unacked message after the visibility "
                                           "timeout (--task-timeout); a message a worker had just fetched "
                                           "when it was killed can be lost (docs/faults.md)",
                                  source="kombu 5.7 kombu/transport/redis.py QoS.restore_visible "
                                         "(visibility_timeout)",
                                  bounds=_bounds.CELERY_REDIS),
                "rabbitmq": Delivery(recovery="late ack: requeued when the dead worker's connection closes",
                                     source=_AMQP_REQUEUE),
            },
        ),
        BackendInfo(
            name="taskiq",
            summary="Taskiq: async receiver on a Redis stream consumer group, acks when executed, idle reclaim",
            brokers=("redis", "rabbitmq"),
            loop_spool=False,  # its no-op drain: 0.96 with the loop's spool, 0.99 with records awaited
            key_patterns=("autoclaim:taskbench:{run_id}:*",),
            delivery={
                "redis": Delivery(recovery="late ack on a stream consumer group: an idle pending message is "
                                           "reclaimed after --task-timeout",
                                  source="taskiq-redis 1.2 taskiq_redis/redis_broker.py RedisStreamBroker.listen "
                                         "(xautoclaim, idle_timeout)"),
                "rabbitmq": Delivery(recovery="quorum queue, ack after the task: requeued when the dead "
                                              "worker's connection closes",
                                     source=_AMQP_REQUEUE),
            },
        ),
        BackendInfo(
            name="dramatiq",
            summary="Dramatiq: Redis broker, acks after the actor returned, dead workers' messages requeued",
            default_delivery=Delivery(recovery="acks after the actor returned: a dead worker's unacked messages "
                                               "are requeued by another worker's heartbeat check",
                                      source="dramatiq 2.2 dramatiq/brokers/redis.py (maintenance re-queues the "
                                             "acks of workers whose heartbeat stopped: heartbeat_timeout)",
                                      bounds=_bounds.DRAMATIQ_REDIS),
        ),
        BackendInfo(
            name="streaq",
            summary="streaq: asyncio worker on a Redis stream consumer group, JSON, idle tasks reclaimed",
            key_patterns=("streaq:taskbench:{run_id}:*",),
            default_delivery=Delivery(recovery="stream consumer group: an idle task is reclaimed after --task-timeout",
                                      source="streaq 7.2 streaq/worker.py (idle_timeout: idle tasks are "
                                             "reclaimed)",
                                      bounds=_bounds.STREAQ_REDIS),
        ),
        BackendInfo(
            name="procrastinate",
            summary="Procrastinate: PostgreSQL jobs table, LISTEN/NOTIFY, worker heartbeats, stalled-job retry "
                    "as documented (opt-in)",
            brokers=("postgres",),
            promise_settings=("procrastinate_retry_stalled",),
            promise=_procrastinate_promise,
            prepares_broker=True,
        ),
        BackendInfo(
            name="pgqueuer",
            summary="PgQueuer: PostgreSQL queue table, LISTEN/NOTIFY, FOR UPDATE SKIP LOCKED, heartbeat_timeout",
            brokers=("postgres",),
            promise_settings=("pgqueuer_heartbeat_timeout",),
            promise=lambda _, s: Delivery(
                after=s["pgqueuer_heartbeat_timeout"],
                recovery=f"any worker's dequeue re-takes a picked job whose heartbeat is older than "
                         f"heartbeat_timeout ({s['pgqueuer_heartbeat_timeout']:g} s, --pgqueuer-heartbeat-timeout; "
                         f"PgQueuer's default 30), on a NOTIFY or within dequeue_timeout; no attempt limit",
                source="pgqueuer 1.6 pgqueuer/adapters/persistence/queries.py (the dequeue query re-takes picked "
                       "jobs past heartbeat_timeout)"),
            prepares_broker=True,
        ),
        BackendInfo(
            name="saq-postgres",
            summary="SAQ on PostgreSQL: SAQ's PostgresQueue (SKIP LOCKED dequeue, LISTEN/NOTIFY), JSON",
            brokers=("postgres",),
            prepares_broker=True,
            promise_settings=("saq_retries",),
            promise=_saq_promise,
            module_name="saq_postgres",
            extra_name="saq",
        ),
        BackendInfo(
            name="rq",
            summary="RQ: Queue.enqueue with the task id as a unique job id, a pool of forking workers, JSON",
            remembers_ids=True,
            promise_settings=("rq_worker_ttl", "rq_maintenance_interval"),
            promise=_rq_promise,
        ),
        BackendInfo(
            name="rq-retry",
            summary="RQ with Retry(max=3): an abandoned job is enqueued again instead of failed",
            remembers_ids=True,
            promise_settings=("rq_worker_ttl", "rq_maintenance_interval"),
            promise=_rq_retry_promise,
            module_name="rq_retry",
            extra_name="rq",
        ),
        BackendInfo(
            name="huey",
            summary="Huey: RedisHuey, the consumer's thread workers (--huey-worker-type), no results",
            key_patterns=("huey.*.taskbench.{run_id}", "huey.*.taskbench.{run_id}.*"),
            default_delivery=Delivery(guarantee=AT_MOST_ONCE,
                                      recovery="none: a worker takes a task off Redis (BRPOP) before it runs it, "
                                               "so a worker killed mid-task loses it",
                                      source="huey 3.5 huey/storage.py RedisStorage.dequeue (BRPOP)"),
        ),
    )
}


@cache
def _module_exists(module: str) -> bool:
    return importlib.util.find_spec(module) is not None


class UnknownBackendError(ValueError):
    pass


def info(name: str) -> BackendInfo:
    """The registry entry of an implemented backend; anything else is an UnknownBackendError."""
    meta = REGISTRY.get(name)
    if meta is None or not meta.implemented:
        known = ", ".join(available(unsafe=True))
        planned = " (planned, not implemented yet)" if meta is not None else ""
        raise UnknownBackendError(f"unknown backend {name!r}{planned}; known: {known}")
    return meta


def available(*, unsafe: bool = False) -> list[str]:
    """Backends whose module exists, in registry order: what ``--backends all`` runs, which leaves the
    unsafe seed wirings out unless ``unsafe``."""
    return [name for name, meta in REGISTRY.items() if meta.implemented and (unsafe or not meta.unsafe)]


def load(name: str) -> Backend:
    """Import a backend's module; a missing library gives an install hint, not a traceback."""
    meta = info(name)
    try:
        module = importlib.import_module(meta.module)
    except ImportError as exc:
        raise ImportError(
            f"backend {name!r} needs its extra: pip install 'taskbench[{meta.extra}]' "
            f"(the harness builds it for you with `taskbench run --backends {name}`): {exc}"
        ) from exc
    backend: Backend = module.backend
    return backend
