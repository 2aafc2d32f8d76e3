"""A task run in a forked child of a worker (a forking library's work horse or process workers): no event loop there.

The worker's ``WorkerContext.execute`` belongs to the parent's event loop and its Redis clients, which a
forked child cannot use. A child runs the task body here instead: the same five workloads, synchronous
(an io workload sleeps ``--io-delay`` with ``time.sleep``; cpu/process crunches in the child, which is a
process of its own already), and records through the ledger's seam for forked children
(:class:`taskbench.ledger.recording.ChildRecorder`).

:func:`measured` keeps the task metrics of :meth:`taskbench.workloads.Workloads.run` for the process that
calls it (a long-lived child, or a parent timing its child); :func:`forked_task` is a pool child's task (process
workers, Celery's prefork pool).
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from taskbench.ledger.recording import ChildRecorder
from taskbench.messages import NOOP, USER_TASK, TaskMessage
from taskbench.metrics import task_metrics
from taskbench.user_task import UserTask, payload_of
from taskbench.workloads import crunch

if TYPE_CHECKING:
    from taskbench.settings import Settings

#: ``prctl`` option: the signal a process gets when the thread that forked it exits (Linux)
PR_SET_PDEATHSIG = 1


class ForkedBody:
    """The task bodies for a forked child; made in the parent before it forks, used in the child."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.recorder = ChildRecorder(settings)
        self.counter_key = f"{settings.prefix}counter"
        # a user's task, imported in the parent before it forks: each child calls it without importing again
        self.user_task = UserTask(settings.task, settings.task_path or "") if settings.task else None
        #: whether the last task run here was a user's task whose call raised (recorded as failed)
        self.failed_last = False

    def run(self, payload: dict[str, Any]) -> int:
        """Run one task and record it; returns how many times it has run, this one included."""
        task = TaskMessage.from_dict(payload)
        started = time.time()
        settings = self.settings
        self.failed_last = False
        if task.workload == USER_TASK:
            return self._user(task, started)
        if task.workload.startswith("io/"):
            if settings.io_delay:
                time.sleep(settings.io_delay)
        elif task.workload.startswith("cpu/"):
            crunch(settings.cpu_iterations)
        elif task.workload != NOOP:
            raise ValueError(f"unknown workload {task.workload!r}")
        incr = None if task.workload == NOOP else (self.counter_key, task.value)
        return self.recorder.record(task.task_id, task.enqueued_at, started, time.time(), incr=incr)

    def _user(self, task: TaskMessage, started: float) -> int:
        if self.user_task is None:
            raise ValueError("a user/task message, and this worker has no task (TASKBENCH_TASK)")
        self.recorder.record_start(task.task_id, started)  # a call that never ends leaves it: indeterminate
        cpu_s, error = self.user_task.call_sync(payload_of(task.payload, task.task_id))
        self.failed_last = error is not None
        return self.recorder.record_outcome(task.task_id, task.enqueued_at, started, time.time(), cpu_s=cpu_s,
                                            error=error)


def forked_task(settings: Settings) -> Callable[[dict[str, Any]], None]:
    """The task of a long-lived pool child (made in the parent before it forks): the forked body, with the
    task metrics of the process that runs it."""
    body = ForkedBody(settings)

    def run(payload: dict[str, Any]) -> None:
        task = TaskMessage.from_dict(payload)
        with measured(settings.backend, task) as outcome:
            runs = body.run(payload)
            outcome.append(not body.failed_last)  # a user's task that raised: counted failed
        if runs > 1:
            task_metrics(settings.backend).task(task.workload).redelivered.inc()

    return run


@contextlib.contextmanager
def measured(backend: str, task: TaskMessage) -> Iterator[list[bool]]:
    """The task metrics around one task: started, in progress, then succeeded (with its durations) or
    failed. The caller appends True to the yielded list once the task succeeded; an exception fails it."""
    metrics = task_metrics(backend).task(task.workload)
    metrics.started.inc()
    metrics.in_progress.inc()
    started = time.time()
    clock = time.perf_counter()
    outcome: list[bool] = []
    try:
        yield outcome
    finally:
        metrics.in_progress.dec()
        if outcome and outcome[-1]:
            metrics.succeeded_at(task.enqueued_at, started, clock)
        else:
            metrics.failed.inc()


def die_with_parent() -> None:
    """In a forked child: SIGKILL when the parent (the thread that forked it) dies, as a container's
    processes die together; a child whose parent is already gone exits. No-op off Linux.

    Also: the parent's event loop wrote signals to a wakeup fd, which the child inherited; a signal the
    child gets must not reach the parent's loop through it.
    """
    parent = os.getppid()
    signal.set_wakeup_fd(-1)
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent or parent == 1:
        os._exit(1)
