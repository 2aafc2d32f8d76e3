"""Prometheus metrics: one container for the task metrics of every backend, one for the API's enqueue.

Every process taskbench starts runs prometheus_client in multiprocess mode with a directory of its
own component (``PROMETHEUS_MULTIPROC_DIR``, set by :func:`use_directory` before prometheus_client is
imported): the API's uvicorn workers share the API's directory, a worker process shares its
directory with its pool children (the cpu/process pool, Celery's prefork children), so one scrape of
a component returns the true totals of all its processes, and two components never count each
other's samples. Without a directory (an embedding process), metrics live on a private registry.

Names follow the Prometheus naming guide: ``taskbench_`` prefix, base units, ``_total`` counters,
bounded labels (``backend``, ``task``, ``queue``), never a task id.
"""

from __future__ import annotations

import contextlib
import glob
import os
import shutil
import struct
import time
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from collections.abc import Iterable, Iterator

    from prometheus_client import CollectorRegistry
    from prometheus_client.metrics import Counter, Gauge, Histogram
    from prometheus_client.metrics_core import Metric

ENV: Final = "PROMETHEUS_MULTIPROC_DIR"
ROOT_ENV: Final = "TASKBENCH_COMPONENT_PID"
#: seconds; from a no-op (~1 ms) to a task stuck for minutes
BUCKETS: Final = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
                  120.0, 300.0)
LABELS: Final = ("backend", "task", "queue")


def use_directory(path: Path) -> Path:
    """Put this process (and the children it starts later) in multiprocess mode, writing to ``path``.

    Must run before prometheus_client is imported. The directory is wiped: a component starts from
    zero, as Prometheus expects of a restarted target.
    """
    if path.exists():
        shutil.rmtree(path)
    path.mkdir(parents=True)
    os.environ[ENV] = str(path)
    os.environ[ROOT_ENV] = str(os.getpid())  # the component's root: its children inherit this
    return path


def prepare_component(component: str) -> Path:
    """Give this process's component its metrics directory, before prometheus_client is imported.

    ``$TASKBENCH_METRICS_DIR/<component>`` when the harness set a base (it keeps the files with the
    run's logs); else a temporary directory removed when the process exits.
    """
    base = os.environ.get("TASKBENCH_METRICS_DIR")
    if base:
        return use_directory(Path(base) / component)
    import atexit
    import tempfile

    path = Path(tempfile.mkdtemp(prefix=f"taskbench-metrics-{component}-"))
    atexit.register(shutil.rmtree, path, ignore_errors=True)
    return use_directory(path)


_local: CollectorRegistry | None = None


def _registry() -> CollectorRegistry | None:
    """Where metrics register: nowhere in multiprocess mode (the collector reads the files)."""
    global _local  # one private registry per process, created on first use
    if os.environ.get(ENV):
        return None
    if _local is None:
        from prometheus_client import CollectorRegistry

        _local = CollectorRegistry()
        # the component's CPU and memory, as a multiprocess component serves them
        _local.register(ComponentCollector(int(os.environ.get(ROOT_ENV) or os.getpid())))
    return _local


def final_key(prefix: str) -> str:
    """Hash of component -> the exposition text of its counters as it stopped (a worker stopped before the
    audit, after a drain timeout, can no longer be scraped; the cross-check reads this instead)."""
    return f"{prefix}metrics-final"


def exposition_registry() -> CollectorRegistry:
    """The registry a ``/metrics`` endpoint of this process serves."""
    path = os.environ.get(ENV)
    if path:
        from prometheus_client import CollectorRegistry
        from prometheus_client.multiprocess import MultiProcessCollector

        registry = CollectorRegistry()
        MultiProcessCollector(None, path=path)  # type: ignore[no-untyped-call]  # checks the directory
        registry.register(SettledFilesCollector(path))
        registry.register(ComponentCollector(int(os.environ.get(ROOT_ENV) or os.getpid())))
        return registry
    local = _registry()
    assert local is not None
    return local


class SettledFilesCollector:
    """prometheus_client's multiprocess collection, minus the files a process is still creating.

    A process's first metric creates its ``.db`` file empty and sizes it a moment later; a scrape in
    between made ``MultiProcessCollector.collect`` raise ``struct.error`` (the /metrics answer was a
    500; seen when a Celery worker started beside a scrape). This collector reads the same files
    through the library's public ``MultiProcessCollector.merge``, leaves out empty ones (they hold no
    sample yet), and reads again once if a file was caught between creation and sizing.
    """

    def __init__(self, path: str) -> None:
        self.path = path

    def _files(self) -> list[str]:
        found = []
        for name in glob.glob(os.path.join(self.path, "*.db")):
            with contextlib.suppress(OSError):  # a dead process's file removed meanwhile
                if os.path.getsize(name) > 0:
                    found.append(name)
        return found

    def collect(self) -> Iterable[Metric]:
        from prometheus_client.multiprocess import MultiProcessCollector

        try:
            return MultiProcessCollector.merge(self._files(), accumulate=True)  # type: ignore[no-any-return,no-untyped-call]
        except (struct.error, FileNotFoundError):
            time.sleep(0.01)
            return MultiProcessCollector.merge(self._files(), accumulate=True)  # type: ignore[no-any-return,no-untyped-call]


class ComponentCollector:
    """CPU and memory of a whole component: its root process and every descendant (pools, workers).

    prometheus_client's own process collector cannot run in multiprocess mode and would see one
    process only; this one answers from whichever process serves the scrape.
    """

    def __init__(self, root: int) -> None:
        self.root = root

    def collect(self) -> Iterator[Metric]:
        import psutil
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

        cpu = 0.0
        rss = 0
        processes = 0
        try:
            root = psutil.Process(self.root)
            tree = [root, *root.children(recursive=True)]
        except psutil.Error:
            tree = []
        for proc in tree:
            try:
                times = proc.cpu_times()
                cpu += times.user + times.system
                rss += proc.memory_info().rss
                processes += 1
            except psutil.Error:
                continue  # exited while we looked
        yield CounterMetricFamily("taskbench_process_cpu_seconds", "CPU time of the component's processes.",
                                  value=cpu)
        yield GaugeMetricFamily("taskbench_process_resident_memory_bytes",
                                "Resident memory of the component's processes.", value=rss)
        yield GaugeMetricFamily("taskbench_processes", "Processes in the component.", value=processes)


@dataclass(frozen=True, slots=True)
class _Labelled:
    """The metric children of one (backend, task, queue): looked up once, not per task."""

    started: Counter
    succeeded: Counter
    failed: Counter
    redelivered: Counter
    in_progress: Gauge
    duration: Histogram
    queue_wait: Histogram
    end_to_end: Histogram

    def succeeded_at(self, enqueued_at: float, started: float, clock: float) -> None:
        """A task that started at ``started`` (wall clock; ``clock``, ``perf_counter``) succeeded now."""
        finished = time.time()
        self.succeeded.inc()
        self.duration.observe(time.perf_counter() - clock)
        self.queue_wait.observe(max(0.0, started - enqueued_at))
        self.end_to_end.observe(max(0.0, finished - enqueued_at))


@cache
def task_metrics(backend: str, queue: str = "default") -> TaskMetrics:
    """The process's one ``TaskMetrics`` of a backend (a metric name registers once per process)."""
    return TaskMetrics(backend, queue)


@cache
def enqueue_metrics(backend: str) -> EnqueueMetrics:
    return EnqueueMetrics(backend)


_families: dict[str, Any] = {}


def _family(kind: str, name: str, doc: str, labels: tuple[str, ...], **kwargs: Any) -> Any:
    """A metric family, created once per process whatever asks for it."""
    family = _families.get(name)
    if family is None:
        import prometheus_client

        family = getattr(prometheus_client, kind)(name, doc, labels, registry=_registry(), **kwargs)
        _families[name] = family
    return family


class TaskMetrics:
    """The task metrics of one process: started, succeeded, failed, durations, in progress, depth.

    Get it through :func:`task_metrics`.
    """

    def __init__(self, backend: str, queue: str = "default") -> None:
        self.backend = backend
        self.queue = queue
        self._children: dict[str, _Labelled] = {}

    def task(self, workload: str) -> _Labelled:
        child = self._children.get(workload)
        if child is None:
            values = (self.backend, workload, self.queue)
            child = _Labelled(
                started=_family("Counter", "taskbench_tasks_started_total", "Tasks a worker started.",
                                LABELS).labels(*values),
                succeeded=_family("Counter", "taskbench_tasks_succeeded_total",
                                  "Tasks that finished without error.", LABELS).labels(*values),
                failed=_family("Counter", "taskbench_tasks_failed_total", "Tasks that raised.",
                               LABELS).labels(*values),
                redelivered=_family(
                    "Counter", "taskbench_tasks_redelivered_total",
                    "Executions of a task that had already run once (a retry or a redelivery).", LABELS,
                ).labels(*values),
                in_progress=_family("Gauge", "taskbench_tasks_in_progress", "Tasks running now.", LABELS,
                                    multiprocess_mode="livesum").labels(*values),
                duration=_family("Histogram", "taskbench_task_duration_seconds", "Start to finish of a task.",
                                 LABELS, buckets=BUCKETS).labels(*values),
                queue_wait=_family("Histogram", "taskbench_task_queue_wait_seconds",
                                   "Enqueue to start of a task.", LABELS, buckets=BUCKETS).labels(*values),
                end_to_end=_family("Histogram", "taskbench_task_end_to_end_seconds",
                                   "Enqueue to finish of a task.", LABELS, buckets=BUCKETS).labels(*values),
            )
            self._children[workload] = child
        return child

    def set_depth(self, depth: int) -> None:
        _family("Gauge", "taskbench_queue_depth", "Tasks waiting in the broker, as a worker last saw it.",
                ("backend", "queue"), multiprocess_mode="mostrecent").labels(self.backend, self.queue).set(depth)


class EnqueueMetrics:
    """The API's side: how long the backend took to hold a task, and how often it refused.

    Get it through :func:`enqueue_metrics`.
    """

    def __init__(self, backend: str) -> None:
        self.duration = _family("Histogram", "taskbench_enqueue_duration_seconds",
                                "Time for the backend to hold a task.", ("backend",),
                                buckets=BUCKETS).labels(backend)
        self.errors = _family("Counter", "taskbench_enqueue_errors_total",
                              "Enqueues the backend refused or failed.", ("backend",)).labels(backend)
