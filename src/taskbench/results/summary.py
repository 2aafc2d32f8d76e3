"""The result vocabulary: the figures of a case's row, its runs when repeated, and its memory."""

from __future__ import annotations

from typing import Any

from taskbench.results.model import Figures, Model, Status


class Spread(Figures):
    """A case run several times: the row is the median run by ``figure``; these are the extremes."""

    runs: int
    figure: str
    min: float
    max: float


class Summary(Figures):
    """The figures a table shows for one case; which ones are set depends on the case's kind."""

    # load (queue and http)
    requests: int | None = None
    rps: float | None = None
    p50_ms: float | None = None
    p95_ms: float | None = None
    p99_ms: float | None = None
    errors_pct: float | None = None
    driver_cpu_pct: float | None = None
    driver_saturated: bool = False
    # queue: the audit
    time_to_run_all_s: float | None = None
    accepted: int | None = None
    executed: int | None = None
    lost: int | None = None
    duplicated: int | None = None
    #: executions beyond each task's first, summed: with a broadcast wiring, (workers - 1) x accepted
    extra_executions: int | None = None
    unexpected: int | None = None
    refused: int | None = None  # answered 409: the id was already submitted (not in errors_pct)
    late: int | None = None
    e2e_p95_ms: float | None = None
    #: the workers' rate: executions per second from the first task's start to the last one's finish
    executed_per_s: float | None = None
    #: the API's rate: tasks accepted (2xx) per second of the load, its first request to its last answer
    accepted_per_s: float | None = None
    #: accepted tasks not yet finished when the load's last answer came (queued or running)
    backlog_end: int | None = None
    #: seconds from the load's last answer to the last task's finish (None: the drain did not end)
    drain_s: float | None = None
    # queue: a user's task (--workload module:callable)
    failed: int | None = None  # accepted tasks of which an execution raised (audit.failed)
    failed_types: dict[str, int] | None = None  # the last exception type -> failed tasks
    #: accepted tasks that started and never finished (audit.indeterminate): hung, or cut by a time limit
    indeterminate: int | None = None
    cpu_p50_ms: float | None = None  # CPU time of one execution (audit.cpu_ms)
    cpu_p95_ms: float | None = None
    rss_start_mb: float | None = None  # the workers' resident memory (the API's for background): first sample
    rss_peak_mb: float | None = None
    rss_end_mb: float | None = None  # the last sample, after the drain: a leak is end well above start
    #: ``--find-max-rate``: the highest offered rate that met the objective (requests per second)
    sustainable_rps: float | None = None
    signed = frozenset({"restart_ready_s", "accepting_again_s", "executing_again_s", "executing_90_s",
                        "first_execution_s"})
    # queue: an injected fault
    fault: str | None = None
    restart_ready_s: float | None = None
    accepting_again_s: float | None = None
    executing_again_s: float | None = None
    executing_90_s: float | None = None
    first_execution_s: float | None = None
    throughput_ratio: float | None = None
    # http
    concurrency: float | None = None
    server_processes_seen: int | None = None
    #: threads that ran the endpoint's requests, over every server process (native ids, counted by the app)
    threads_seen: int | None = None
    #: the most TCP connections established to the server at once during the load (its port, /proc/net/tcp)
    connections_peak: int | None = None
    server_cpu_s: float | None = None
    max_users: int | None = None
    peak_rps: float | None = None
    # celery
    tasks: int | None = None
    elapsed_s: float | None = None
    tasks_per_s: float | None = None
    cpu_s: float | None = None
    max_parallel: int | None = None
    # repeated cases
    spread: Spread | None = None

    def figure(self, name: str) -> Any:
        """A figure by its field name (columns are declared by name and checked against the fields)."""
        if name not in Summary.model_fields:
            raise KeyError(f"no figure {name!r} in a summary")
        return getattr(self, name)


class RssRecord(Figures):
    """Resident memory of the processes that ran the tasks (each worker with its children; the API for
    ``background``), summed, sampled every :attr:`interval_s` from the load's start to the drain's end."""

    interval_s: float = 1.0
    samples_mb: list[float] = []
    start_mb: float = 0.0
    peak_mb: float = 0.0
    end_mb: float = 0.0
    processes: list[str] = []


class RepeatRun(Model):
    summary: Summary
    status: Status


class SeriesPoint(Model):
    """HTTP cases: one second of the load (users, responses, failures)."""

    t: int
    users: int
    rps: int
    errors: int
