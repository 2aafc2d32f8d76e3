"""The one seam every backend implements: a producer in the API, a worker loop in its own process."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:
    import redis.asyncio as aioredis
    from fastapi import BackgroundTasks

    from taskbench.ledger.recording import Recorder
    from taskbench.messages import TaskMessage
    from taskbench.settings import Settings
    from taskbench.workloads import Workloads

Execute = Callable[["TaskMessage"], Awaitable[None]]


class DuplicateTask(Exception):  # noqa: N818 - a refusal, not a failure
    """Raised by ``Producer.enqueue`` when the library refused the task because it holds (or, for
    a backend that remembers ids, held) a task of the same id: nothing was enqueued."""

    def __init__(self, task_id: str) -> None:
        super().__init__(f"the broker already holds a task with id {task_id!r}")
        self.task_id = task_id


class Producer(Protocol):
    """Puts one task where a worker will find it."""

    async def enqueue(self, task: TaskMessage, later: BackgroundTasks) -> None:
        """Return once the backend holds the task.

        Raise :class:`DuplicateTask` when the library itself refused it as a known id (arq's job id,
        SAQ's job key); a library that cannot tell says nothing. ``later`` is the request's FastAPI
        BackgroundTasks: only the in-process backend uses it.
        """


@dataclass(frozen=True, kw_only=True)
class ServiceContext:
    """What a producer gets from the API process."""

    settings: Settings
    workloads: Workloads  # the in-process backend runs tasks here


@dataclass(frozen=True, kw_only=True)
class WorkerContext:
    """What a worker loop gets from its process."""

    settings: Settings
    execute: Execute  # runs the workload and writes the ledger
    ready: Callable[[], Awaitable[None]]  # call once the worker can take tasks
    #: how this process records its executions (the ledger's one seam): a library that does not run its tasks on
    #: this loop says where it does (``recording.tasks_run``) before the first one; None: nothing to tell
    recording: Recorder | None = None
    #: from a library's thread: run the task there if its body needs no loop (True), else leave it (False)
    execute_here: Callable[[TaskMessage], bool] = lambda task: False


class Backend(Protocol):
    """A background-task library, wired the way its documentation recommends.

    A backend is one module in ``taskbench.backends`` exposing ``backend``; nothing outside that
    module imports the library. What the harness must know without importing the library
    (durability, whether it has workers, the keys it creates) is in ``taskbench.backends.REGISTRY``.
    """

    def producer(self, ctx: ServiceContext) -> AbstractAsyncContextManager[Producer]:
        """Open the producer for the API process's lifetime."""

    async def run_worker(self, ctx: WorkerContext) -> None:
        """Consume tasks until SIGTERM/SIGINT, then finish or return in-flight tasks and return."""

    async def purge(self, settings: Settings) -> None:
        """Delete what this run created on a broker other than Redis (queues, streams, subjects).

        Redis keys are deleted by the harness (the run prefix and the registry's key patterns).
        """


@runtime_checkable
class CountsQueue(Protocol):
    """Optional: a backend that can count its waiting tasks cheaply feeds ``taskbench_queue_depth``."""

    async def queue_depth(self, settings: Settings, redis: aioredis.Redis) -> int:
        """Tasks in the broker not yet finished; ``redis`` is a client of the broker's Redis (the ledger's
        server too, unless the run parts them)."""


@runtime_checkable
class ChecksBroker(Protocol):
    """Optional, on a producer: check the broker over the producer's own connection (for ``/health``).

    Without it the API PINGs a Redis broker or opens a TCP connection to a RabbitMQ/NATS one.
    """

    async def check_broker(self) -> None:
        """Return once the broker answered; raise otherwise (the caller bounds the wait)."""


@runtime_checkable
class HasDashboard(Protocol):
    """Optional: the library's own web dashboard, served by ``taskbench dashboard``."""

    async def run_dashboard(self, settings: Settings, host: str, port: int, auth: str | None) -> None:
        """Serve until SIGINT/SIGTERM; ``auth`` is ``user:password`` for HTTP basic auth, or None."""


@runtime_checkable
class PreparesBroker(Protocol):
    """Optional: work a backend does once per run on its broker before any API or worker starts.

    PostgreSQL queues install their schema here (tables, functions, triggers: the library's own
    migrations), so an API and several workers starting at once never race to create it. The
    harness (``taskbench prepare``) calls it in the backend's environment; it must be idempotent.
    """

    async def prepare_broker(self, settings: Settings) -> None:
        """Create what the run's tasks need on the broker; return once it is there."""
