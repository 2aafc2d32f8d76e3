"""Celery: the API publishes through kombu off its event loop; an embedded Celery worker runs the tasks.

Wiring (Celery 5.7, kombu 5.7), and why:
- JSON only (``task_serializer``, ``accept_content``); results are ignored, the ledger records runs;
- at-least-once: ``task_acks_late`` with ``task_reject_on_worker_lost`` and a prefetch of one per
  slot, so a task is acknowledged only once it finished and a dead worker's task goes back to the
  queue. On Redis an unacknowledged message is restored after ``visibility_timeout`` (=
  ``--task-timeout``, the longest a task may run: a shorter one would redeliver running tasks);
  RabbitMQ redelivers as soon as the dead worker's connection closes. kombu sweeps for such messages
  every ``task_timeout / 4`` s here (its default is about every 100 s);
- every key lives under the run prefix (kombu's ``global_keyprefix``), the queue is named after the
  run, so nothing is shared with other runs and the harness can delete it all;
- ``send_task`` is blocking I/O: the API runs it on the shared producer thread pool
  (:mod:`._sync_producer`: ``--producer-threads``, bounded by ``--enqueue-timeout``), never on its event
  loop, and answers once it returned (with RabbitMQ, ``confirm_publish`` makes that the broker's ack);
  kombu's producer pool holds as many connections as there are threads;
- coroutines: Celery 5.7 has no ``async def`` tasks. Instead of a custom pool package we keep one
  long-lived event loop per worker process (the process's own, which owns the Workloads' clients)
  and run Celery's ``threads`` pool beside it: a pool thread hands the coroutine to that loop with
  ``run_coroutine_threadsafe`` and waits. The seed's ``run_until_complete`` on a loop taken at import
  time is gone, and so is prefork's "daemonic processes are not allowed to have children": the
  cpu/process workload's pool is a child of the worker process itself;
- ``--option celery.pool=prefork`` (Celery's own default, and the pool seed 000 ran: ``run --versions article-000``,
  where Celery 5.3.6's threads pool runs about a task a second at concurrency 1, celery/celery#6941) runs
  the task in Celery's forked pool children instead, synchronously, with :mod:`._forked` (a Redis client
  of the child's own; the record's reply read before the task returns, so before the late ack); each child
  dies with the worker and ignores the SIGTERM the harness sends the worker's process group. cpu/process
  crunches in the child itself, which is a process of its own already;
- the worker is Celery's ``WorkController`` (no CLI, no signal handlers of its own) in a thread;
  SIGTERM/SIGINT on our loop start Celery's warm shutdown, which waits for running tasks.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import os
import socket
import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

from celery import Celery

from taskbench.backends._forked import die_with_parent, forked_task
from taskbench.backends._sync_producer import SyncProducer, sync_producer
from taskbench.backends._wiring import pick
from taskbench.backends._worker import blocking_execute, stop_requested
from taskbench.backends.base import ServiceContext, WorkerContext
from taskbench.backends.celery import Options
from taskbench.messages import TaskMessage
from taskbench.settings import Settings

if TYPE_CHECKING:
    import redis.asyncio as aioredis
    from fastapi import BackgroundTasks

log = logging.getLogger("taskbench.backends.celery.backend")

FUNCTION = "taskbench_execute"


def queue_name(settings: Settings) -> str:
    return f"{settings.prefix}celery"


class _Wiring:
    """Celery on one broker: kombu's transport options, how the queue is counted, what a purge deletes."""

    def transport(self, settings: Settings) -> dict[str, Any]:
        raise NotImplementedError

    async def queue_depth(self, settings: Settings, redis: aioredis.Redis) -> int:
        raise NotImplementedError("queue depth is read on Redis only")

    def purge(self, settings: Settings) -> None:
        """Nothing to delete."""


class _OnRedis(_Wiring):
    """kombu's keys under the run's prefix (the harness deletes them); a dead worker's message is restored
    after the visibility timeout."""

    def transport(self, settings: Settings) -> dict[str, Any]:
        return {
            "global_keyprefix": settings.prefix,
            "visibility_timeout": settings.task_timeout,
            # kombu's default sweep for expired unacked messages runs about every 100 s
            "unacked_restore_interval": max(1, min(10, round(settings.task_timeout / 4))),
            "unacked_restore_throttle": 1,
        }

    async def queue_depth(self, settings: Settings, redis: aioredis.Redis) -> int:
        # kombu's list for the queue, under the global key prefix
        return int(await redis.llen(settings.prefix + queue_name(settings)))


class _OnRabbitMQ(_Wiring):
    """Publisher confirms; the run's queue and exchange are deleted by :meth:`purge`."""

    def transport(self, settings: Settings) -> dict[str, Any]:
        return {"confirm_publish": True}

    def purge(self, settings: Settings) -> None:
        app = make_app(settings)
        try:
            with app.connection_for_write() as conn:
                channel = conn.default_channel
                with contextlib.suppress(Exception):
                    channel.queue_delete(queue_name(settings))
                with contextlib.suppress(Exception):
                    channel.exchange_delete(queue_name(settings))
        finally:
            app.close()


_WIRINGS: dict[str, _Wiring] = {"redis": _OnRedis(), "rabbitmq": _OnRabbitMQ()}


def _wiring(settings: Settings) -> _Wiring:
    return pick(_WIRINGS, settings.broker, "celery")


def make_app(settings: Settings) -> Celery:
    app = Celery("taskbench", broker=settings.broker_address, set_as_current=False)
    transport = _wiring(settings).transport(settings)
    app.conf.update(
        task_serializer="json",
        result_serializer="json",
        accept_content=["json"],
        event_serializer="json",
        task_ignore_result=True,
        result_backend=None,
        task_acks_late=True,
        task_reject_on_worker_lost=True,
        task_acks_on_failure_or_timeout=True,
        worker_prefetch_multiplier=1,
        task_default_queue=queue_name(settings),
        task_create_missing_queues=True,
        broker_transport_options=transport,
        broker_connection_retry_on_startup=True,
        broker_pool_limit=settings.producer_threads,  # one connection per producer thread
        worker_hijack_root_logger=False,
        worker_send_task_events=False,  # Flower asks for them at run time when it is watching
        timezone="UTC",
    )
    return app


async def _first(*events: asyncio.Event) -> None:
    waiters = [asyncio.create_task(e.wait()) for e in events]
    try:
        await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for waiter in waiters:
            waiter.cancel()


def _message(payload: dict[str, Any]) -> TaskMessage:
    return TaskMessage.from_dict(payload)


def _child_started(**_: Any) -> None:
    """A prefork child, before its first task: it dies with the worker (as a container's processes would),
    and ignores SIGTERM: the harness stops a worker by its process group, children included, where ``docker
    stop`` signals the main process only; the worker's warm shutdown then lets the child finish its task and
    closes it (billiard leaves an ignored SIGTERM so, as under its own ``REMAP_SIGTERM``)."""
    import signal

    die_with_parent()
    signal.signal(signal.SIGTERM, signal.SIG_IGN)


class _Producer:
    def __init__(self, app: Celery, threads: SyncProducer) -> None:
        self._app = app
        self._threads = threads
        self._publish = functools.partial(app.send_task, FUNCTION)

    async def enqueue(self, task: TaskMessage, later: BackgroundTasks) -> None:
        await self._threads.run(functools.partial(self._publish, args=(task.to_dict(),), task_id=task.task_id))


class CeleryBackend:
    @asynccontextmanager
    async def producer(self, ctx: ServiceContext) -> AsyncIterator[_Producer]:
        app = make_app(ctx.settings)
        try:
            async with sync_producer(ctx.settings, "celery") as threads:
                yield _Producer(app, threads)
        finally:
            app.close()

    async def run_worker(self, ctx: WorkerContext) -> None:
        from celery.worker import WorkController

        settings = ctx.settings
        app = make_app(settings)
        loop = asyncio.get_running_loop()
        if Options.of(settings).pool == "prefork":
            from celery.signals import worker_process_init

            # a pool child runs the task itself (a synchronous body and Redis client, made before the fork)
            execute = forked_task(settings)
            worker_process_init.connect(_child_started, weak=False)
        else:
            execute = blocking_execute(ctx)  # a pool thread: the task runs on the process's loop

        @app.task(name=FUNCTION, acks_late=True, reject_on_worker_lost=True)  # type: ignore[untyped-decorator,unused-ignore]
        def run(payload: dict[str, Any]) -> None:
            execute(payload)

        ready, done = asyncio.Event(), asyncio.Event()

        def on_ready(_: Any) -> None:  # the consumer is consuming
            loop.call_soon_threadsafe(ready.set)

        worker = WorkController(
            ready_callback=on_ready,
            app=app,
            hostname=f"taskbench-{os.getpid()}@{socket.gethostname()}",
            pool_cls=Options.of(settings).pool,
            concurrency=settings.concurrency,
            queues=[queue_name(settings)],
            without_mingle=True,
            without_gossip=True,
            loglevel="WARNING",
        )

        def serve() -> None:
            try:
                worker.start()
            finally:
                loop.call_soon_threadsafe(done.set)

        def stop() -> None:
            # Celery's own warm shutdown, as its SIGTERM handler does it: the flag is seen by the
            # consumer thread between two reads of the broker (within 2 s), which then stops the
            # worker itself (the running tasks finish on this loop). Calling worker.stop() from another
            # thread raced the consumer for the AMQP socket: the consumer read the close-ok of the
            # remote-control channel, and the stopping thread waited for it forever (RabbitMQ; seen
            # with py-spy in Pidbox.stop -> Channel.close -> drain_events), so it was SIGKILLed.
            from celery.worker import state

            state.should_stop = 0  # EX_OK

        threading.Thread(target=serve, name="taskbench-celery-worker", daemon=True).start()
        with stop_requested(stop) as stopping:
            await _first(ready, done)
            if done.is_set():
                raise RuntimeError("the Celery worker stopped during start-up (see its log)")
            await ctx.ready()
            await _first(done, stopping)
            # Running tasks may finish within the stop timeout; what is left is redelivered. The
            # consumer thread stops the worker itself (warm: the pool lets running tasks finish) and
            # only then returns: wait for it, or leaving would end this loop under the tasks (they
            # would fail with CancelledError and be acknowledged).
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(done.wait(), settings.shutdown_timeout)

    async def queue_depth(self, settings: Settings, redis: aioredis.Redis) -> int:
        return await _wiring(settings).queue_depth(settings, redis)

    async def run_dashboard(self, settings: Settings, host: str, port: int, auth: str | None) -> None:
        """Flower, replacing this process (it runs its own Tornado loop and signal handling)."""
        import sys

        argv = [sys.executable, "-m", "celery", "-A", "taskbench.backends.celery.backend:flower_app", "flower",
                f"--address={host}", f"--port={port}", "--url_prefix="]
        if auth:
            argv.append(f"--basic-auth={auth}")
        os.execv(sys.executable, argv)  # noqa: S606 - our own interpreter and arguments

    async def purge(self, settings: Settings) -> None:
        """Delete the run's queue on RabbitMQ (on Redis the harness deletes the run's keys)."""
        _wiring(settings).purge(settings)


def __getattr__(name: str) -> Any:
    # ``celery -A taskbench.backends.celery.backend:flower_app flower``: the app of the TASKBENCH_* run
    if name == "flower_app":
        app = make_app(Settings())
        app.conf.worker_send_task_events = True
        return app
    raise AttributeError(name)


backend = CeleryBackend()
